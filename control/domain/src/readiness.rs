//! Readiness of the parts of a node that run beside the database (the local speech node):
//! each reports one [`ComponentStatus`] under its name, and `GET /readyz` lists them.
//!
//! A component never makes `/readyz` answer 503: the database alone decides that, so a
//! load balancer keeps a node in rotation whose calls can still run (a call that needs no
//! speech, or names a hosted synthesizer). The body's `status` is `degraded` while any
//! component is `starting` or `down`, so an operator sees it.

use std::collections::BTreeMap;

use parking_lot::RwLock;
use serde::Serialize;

/// The state of one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ComponentStatus {
    /// Running and serving.
    Ok,
    /// Its process runs and is not serving yet (loading its models).
    Starting,
    /// Not running: absent, between an exit and its restart, or given up on.
    Down,
    /// Turned off by configuration.
    Disabled,
}

impl ComponentStatus {
    /// Whether the component counts against the node's overall status.
    pub fn degrades(self) -> bool {
        matches!(self, ComponentStatus::Starting | ComponentStatus::Down)
    }
}

/// The components of this node and their states. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct Readiness {
    components: RwLock<BTreeMap<String, ComponentStatus>>,
}

impl Readiness {
    /// Records `name`'s state (replacing the previous one).
    pub fn set(&self, name: &str, status: ComponentStatus) {
        self.components.write().insert(name.to_string(), status);
    }

    /// The state of `name`, if it reported one.
    pub fn get(&self, name: &str) -> Option<ComponentStatus> {
        self.components.read().get(name).copied()
    }

    /// Every component with its state, by name.
    pub fn snapshot(&self) -> BTreeMap<String, ComponentStatus> {
        self.components.read().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_report_and_degrade() {
        let r = Readiness::default();
        assert!(r.snapshot().is_empty());
        r.set("speech", ComponentStatus::Starting);
        assert_eq!(r.get("speech"), Some(ComponentStatus::Starting));
        r.set("speech", ComponentStatus::Ok);
        assert_eq!(r.snapshot().len(), 1);
        assert!(!ComponentStatus::Ok.degrades() && !ComponentStatus::Disabled.degrades());
        assert!(ComponentStatus::Down.degrades() && ComponentStatus::Starting.degrades());
    }
}
