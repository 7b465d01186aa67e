//! HTTP surface: shared state, router composition, conventions (errors, paging,
//! extractors) and the OpenAPI document.
//!
//! ## Adding a resource group
//! 1. Create `api/v1/<group>.rs` with handlers annotated `#[utoipa::path(...)]` and a
//!    `pub(super) fn routes() -> OpenApiRouter<AppState>` built with `routes!(...)`.
//! 2. List it in [`v1::groups`]. The OpenAPI document and the router are produced from
//!    the same `OpenApiRouter`, so an API route cannot be served without being documented.
//!    The one exception is the web console ([`console`]: `/` and `/console/…`),
//!    a browser client of the API that answers HTML, scripts and styles, not JSON.
//! 3. Handlers take `Authz<cap::X>` (capability check) and call
//!    `caller.account_scope(&state)` / `caller.tenant_scope(&state)` for scope; use
//!    [`Json`], [`Query`], [`Path`] from here, return [`ApiResult`], page with
//!    [`PageParams`] / [`Page`], and add store methods in `store/<group>.rs` plus
//!    migrations `01NN_<group>.sql` under both `migrations/sqlite` and `migrations/postgres`.

pub mod caller;
pub mod comma_list;
mod console;
pub mod error;
pub mod extract;
pub mod idempotency;
pub mod legacy;
mod metrics;
mod ops;
pub mod page;
pub mod report_page;
mod server;
pub mod v1;
pub mod vocab;

use std::sync::Arc;

use http::{HeaderName, Request};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use utoipa::{
    Modify, OpenApi,
    openapi::security::{Http, HttpAuthScheme, SecurityScheme},
};
use utoipa_axum::router::OpenApiRouter;

pub use crate::metrics::Metrics;
pub use crate::settings::{HttpSettings, Settings};
pub use error::{ApiError, ApiResult, ErrorBody, REGISTRY};
pub use extract::{Json, MAX_JSON_BODY_BYTES, Path, Query};
pub use page::{DEFAULT_LIMIT, MAX_LIMIT, Page, PageParams};
pub use server::serve;

use crate::{auth::throttle::LoginThrottle, services::Services, store::Store};

/// State shared by every handler: the domain [`Services`] (reached through `Deref`, so a
/// handler writes `state.store`) and what only the HTTP layer needs.
#[derive(Clone, Debug)]
pub struct AppState {
    pub services: Services,
    pub settings: Arc<Settings>,
    /// A password hash at the configured cost, verified against when a login names an
    /// unknown email so response time does not reveal which emails exist.
    pub(crate) dummy_hash: Arc<String>,
    /// Failed-login counters of `POST /v1/auth/login`.
    pub(crate) login_throttle: LoginThrottle,
    /// Admission of test and browser calls per account (see [`crate::test_calls`]).
    pub(crate) test_call_gate: Arc<crate::test_calls::TestCallGate>,
}

impl std::ops::Deref for AppState {
    type Target = Services;
    fn deref(&self) -> &Services {
        &self.services
    }
}

impl AppState {
    /// The use cases ([`crate::usecases`]) over this state's services and settings.
    pub fn ops(&self) -> crate::usecases::Ops<'_> {
        crate::usecases::Ops {
            services: &self.services,
            settings: &self.settings,
            test_calls: &self.test_call_gate,
        }
    }

    /// Like [`AppState::try_new`], panicking on invalid `objects` / `stt` settings.
    pub fn new(store: Store, settings: Settings) -> Self {
        Self::try_new(store, settings).unwrap_or_else(|e| panic!("invalid settings: {e}"))
    }

    /// Builds the services and the state (an error names the offending setting).
    pub fn try_new(store: Store, settings: Settings) -> Result<Self, String> {
        let services = Services::new(store, &settings)?;
        Ok(Self::with_services(services, settings))
    }

    /// The HTTP layer's state over services built already (the binary shares them with
    /// the call engine).
    pub fn with_services(services: Services, settings: Settings) -> Self {
        let dummy_hash = crate::auth::password::hash_password(
            "callsmith-dummy-password",
            settings.password_cost,
        )
        .unwrap_or_default();
        let login_throttle = LoginThrottle::new(settings.login_throttle, services.store.clone());
        AppState {
            services,
            settings: Arc::new(settings),
            dummy_hash: Arc::new(dummy_hash),
            login_throttle,
            test_call_gate: Default::default(),
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "callsmith control API", description = "Administration, authentication and account resources of callsmith."),
    modifiers(&SecurityAddon),
    components(schemas(ErrorBody, vocab::FlagName)),
    tags(
        (name = "operations", description = "Health, readiness, metrics and this document"),
        (name = "auth", description = "Login, sessions, password handling and magic links"),
        (name = "profile", description = "The caller's own profile"),
        (name = "users", description = "Users of an account"),
        (name = "tenants", description = "Tenants and tenant API keys (administrative)"),
        (name = "accounts", description = "Accounts and account API keys (administrative)"),
        (name = "trunks", description = "SIP trunks of a tenant (administrative)"),
        (name = "feature-flags", description = "Per-tenant feature-flag rules (administrative)"),
        (name = "legacy", description = "Legacy campaign family: Profile, Account, Scenario, Campaign, Contact and Attempt groups, attempt statistics and reports (HTTP Basic account_sid:account_token, RPC-style status errors)"),
        (name = "classifiers", description = "Versioned intent classifiers: training and prediction"),
        (name = "llm", description = "LLM chat streams against OpenAI-compatible providers"),
    )
)]
struct ApiDoc;

struct SecurityAddon;

impl Modify for SecurityAddon {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        components.add_security_scheme(
            "basic",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Basic)),
        );
    }
}

pub use axum::Router;

/// Every route group (one router per module), in the order [`api`] merges them.
fn groups() -> Vec<OpenApiRouter<AppState>> {
    let mut groups = vec![ops::routes()];
    groups.extend(legacy::groups());
    groups.extend(v1::groups());
    groups
}

/// Every documented route, before state is attached.
fn api() -> OpenApiRouter<AppState> {
    groups().into_iter().fold(
        OpenApiRouter::with_openapi(ApiDoc::openapi()),
        OpenApiRouter::merge,
    )
}

/// Schema names under which two route groups register different schemas. Merging keeps
/// the first group's schema for a name, so a route of a later group whose type shares it
/// would be documented with the other type's schema; the document is exact only when this
/// is empty.
pub fn schema_name_clashes() -> Vec<String> {
    let mut seen: std::collections::BTreeMap<String, serde_json::Value> = Default::default();
    let mut clashes = std::collections::BTreeSet::new();
    let docs =
        std::iter::once(ApiDoc::openapi()).chain(groups().into_iter().map(|g| g.into_openapi()));
    for doc in docs {
        let Some(components) = &doc.components else {
            continue;
        };
        for (name, schema) in &components.schemas {
            let schema = serde_json::to_value(schema).unwrap_or_default();
            match seen.get(name) {
                Some(first) if *first != schema => {
                    clashes.insert(name.clone());
                }
                Some(_) => {}
                None => {
                    seen.insert(name.clone(), schema);
                }
            }
        }
    }
    clashes.into_iter().collect()
}

/// The OpenAPI 3.1 document of every route [`router`] serves.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = api().split_for_parts().1;
    document_body_limit(&mut doc);
    doc
}

/// Every operation taking a JSON body answers 413 when the body exceeds
/// [`MAX_JSON_BODY_BYTES`], in its family's envelope: documented here once rather than on
/// each route. The legacy family (RpcStatus only) answers an oversized body with 400
/// INVALID_ARGUMENT and is left as it is.
fn document_body_limit(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{RefOr, ResponseBuilder, content::ContentBuilder, schema::Ref};
    const ENVELOPES: [&str; 2] = ["ErrorBody", "AdapterErrorBody"];
    let description = format!("Request body larger than {MAX_JSON_BODY_BYTES} bytes");
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
            &mut item.get,
        ];
        for op in operations.into_iter().flatten() {
            let json_body = op
                .request_body
                .as_ref()
                .is_some_and(|b| b.content.contains_key("application/json"));
            if !json_body || op.responses.responses.contains_key("413") {
                continue;
            }
            let envelope = op.responses.responses.values().find_map(|r| {
                let RefOr::T(r) = r else { return None };
                let schema = r.content.get("application/json")?.schema.as_ref()?;
                let RefOr::Ref(Ref { ref_location, .. }) = schema else {
                    return None;
                };
                let name = ref_location.rsplit('/').next()?;
                ENVELOPES.contains(&name).then(|| ref_location.clone())
            });
            let Some(envelope) = envelope else { continue };
            let response = ResponseBuilder::new()
                .description(&description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::new(envelope)))
                        .build(),
                )
                .build();
            op.responses
                .responses
                .insert("413".to_string(), RefOr::T(response));
        }
    }
}

/// The complete HTTP application: routes, `/openapi.json`, the web console, envelope
/// fallbacks, metrics, request ids (`x-request-id`, generated when absent, echoed on every
/// response) and tracing.
pub fn router(state: AppState) -> Router {
    let (routes, _doc) = api().split_for_parts();
    let x_request_id = HeaderName::from_static("x-request-id");
    routes
        .merge(console::routes())
        .fallback(error::route_not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_JSON_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track))
        .layer(
            tower_http::trace::TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                let id = req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("");
                tracing::info_span!("http", method = %req.method(), uri = %req.uri().path(), request_id = %id)
            }),
        )
        .layer(PropagateRequestIdLayer::new(x_request_id.clone()))
        .layer(SetRequestIdLayer::new(x_request_id, MakeRequestUuid))
        .with_state(state)
}
