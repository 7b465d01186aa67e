//! OpenAPI schemas of the code lists kept as constants elsewhere (countries, regions,
//! declared flags): a request field documented with one of these lists exactly the
//! codes the handler accepts, so a client (or schemathesis) can tell a valid value from
//! an invalid one without a round trip.

use utoipa::openapi::{
    RefOr,
    schema::{ObjectBuilder, Schema, Type},
};

use crate::flags;

/// A string schema listing `codes` (and the empty string when `empty` is true).
fn code_list(
    description: &str,
    empty: bool,
    codes: impl Iterator<Item = &'static str>,
) -> RefOr<Schema> {
    let values = empty.then_some("").into_iter().chain(codes);
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(values))
        .into()
}

/// An account sid as a rule names it: `acc_` and the rest of the sid.
pub struct AccountSid;

impl utoipa::PartialSchema for AccountSid {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("An account sid (acc_…)."))
            .pattern(Some(r"^acc_[\s\S]"))
            .into()
    }
}

impl utoipa::ToSchema for AccountSid {}

macro_rules! code_schema {
    ($(#[$m:meta])* $name:ident, $description:literal, $empty:literal, $codes:expr) => {
        $(#[$m])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                code_list($description, $empty, $codes)
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

code_schema!(
    /// An ISO 3166-1 alpha-2 code in lowercase (`flags::COUNTRIES`).
    CountryCode,
    "ISO 3166-1 alpha-2 country code, lowercase.",
    false,
    flags::COUNTRIES.iter().copied()
);

code_schema!(
    /// An account's country: empty (unset) or a country code; any case is accepted and
    /// stored lowercase.
    AccountCountry,
    "Empty (unset) or an ISO 3166-1 alpha-2 country code; any case is accepted, stored lowercase.",
    true,
    flags::COUNTRIES.iter().copied()
);

code_schema!(
    /// A region code (`flags::REGIONS`).
    RegionCode,
    "Region code: af Africa, ap Asia-Pacific, eu Europe, me Middle East, na North America, sa South and Central America and the Caribbean.",
    false,
    flags::REGIONS.iter().map(|(code, _)| *code)
);

code_schema!(
    /// An account's region: empty (unset) or a region code.
    AccountRegion,
    "Empty (unset) or a region code (af, ap, eu, me, na, sa); any case is accepted, stored lowercase.",
    true,
    flags::REGIONS.iter().map(|(code, _)| *code)
);

code_schema!(
    /// A declared feature flag's name (`flags::DECLARED_FLAGS`).
    FlagName,
    "A declared feature flag.",
    false,
    flags::DECLARED_FLAGS.iter().copied()
);
