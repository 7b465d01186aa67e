#![allow(clippy::result_large_err)] // figment::Jail's closure error type is figment's own

//! The `[[sip.trunks]]` settings: tenants, default trunk, gateways, number formats and
//! codecs.

use super::*;

/// `inbound_tenant` binds a trunk's inbound calls to one tenant's numbers
/// (`Store::inbound_route`); a trunk without it is shared.
#[test]
fn a_trunk_binds_inbound_calls_to_a_tenant() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "c.toml",
            "[[sip.trunks]]\nname = \"own\"\ngateway = \"127.0.0.1:5080\"\ninbound_tenant = \"ten_a\"\n\
             [[sip.trunks]]\nname = \"shared\"\ngateway = \"127.0.0.1:5081\"\n",
        )?;
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        let tenants: Vec<_> = c
            .sip
            .to_sip()
            .map_err(|e| e.to_string())?
            .trunks
            .iter()
            .map(|t| (t.name.clone(), t.inbound_tenant.clone()))
            .collect();
        assert_eq!(
            tenants,
            [
                ("own".to_string(), Some("ten_a".to_string())),
                ("shared".to_string(), None)
            ]
        );
        Ok(())
    });
}

#[test]
fn a_default_trunk_naming_no_trunk_is_refused_at_start() {
    figment::Jail::expect_with(|jail| {
        let trunks = "[[sip.trunks]]\nname = \"carrier\"\ngateway = \"127.0.0.1:5070\"\n";
        jail.create_file(
            "ok.toml",
            &format!("[sip]\ndefault_trunk = \"carrier\"\n{trunks}"),
        )?;
        let c =
            Config::load(Some(Path::new("ok.toml")), Config::env()).map_err(|e| e.to_string())?;
        c.sip.to_sip().map_err(|e| e.to_string())?;
        assert_eq!(
            c.sip.node_trunks(),
            callsmith_domain::communication::caller::NodeTrunks {
                names: vec!["carrier".into()],
                default: Some("carrier".into()),
            }
        );
        jail.create_file(
            "typo.toml",
            &format!("[sip]\ndefault_trunk = \"carier\"\n{trunks}"),
        )?;
        let c =
            Config::load(Some(Path::new("typo.toml")), Config::env()).map_err(|e| e.to_string())?;
        let err = c.sip.to_sip().unwrap_err().to_string();
        assert!(
            err.contains("sip.default_trunk \"carier\" names no trunk") && err.contains("carrier"),
            "{err}"
        );
        let mut none = Config::default();
        none.sip.default_trunk = Some("carrier".into());
        let err = none.sip.to_sip().unwrap_err().to_string();
        assert!(err.contains("no trunks are configured"), "{err}");
        jail.create_file("twice.toml", &format!("[sip]\n{trunks}{trunks}"))?;
        let c = Config::load(Some(Path::new("twice.toml")), Config::env())
            .map_err(|e| e.to_string())?;
        let err = c.sip.to_sip().unwrap_err().to_string();
        assert!(err.contains("two trunks are named \"carrier\""), "{err}");
        Ok(())
    });
}

#[test]
fn trunk_gateways_are_addresses_or_host_names() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "c.toml",
            "[[sip.trunks]]\nname = \"carrier\"\ngateway = \"localhost:5070\"\n",
        )?;
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        assert_eq!(
            c.sip.trunks[0].gateway,
            callsmith_sip::Gateway::Host {
                name: "localhost".into(),
                port: 5070
            }
        );
        jail.create_file(
            "bad.toml",
            "[[sip.trunks]]\nname = \"carrier\"\ngateway = \"sip.carrier.example\"\n",
        )?;
        let err = Config::load(Some(Path::new("bad.toml")), Config::env())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("host:port") && err.contains("IP:port") && err.contains("gateway"),
            "{err}"
        );
        Ok(())
    });
}

/// A `sips:` gateway (port 5061 when left out) on a trunk that is not TLS stops the
/// start with the trunk and the rule named.
#[test]
fn a_sips_gateway_needs_a_tls_trunk() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "c.toml",
            "[[sip.trunks]]\nname = \"secure\"\ngateway = \"sips:sip.carrier.example\"\n",
        )?;
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        let gateway = &c.sip.trunks[0].gateway;
        assert!(gateway.sips);
        assert_eq!(gateway.to_string(), "sips:sip.carrier.example:5061");
        let err = c.sip.to_sip().unwrap_err().to_string();
        assert!(
            err.contains("\"secure\"") && err.contains("only used over TLS"),
            "{err}"
        );
        Ok(())
    });
}

#[test]
fn unknown_keys_are_refused_beside_every_number_format_kind() {
    for kind in ["e164_plus", "e164", "as_is"] {
        figment::Jail::expect_with(|jail| {
            let text = format!(
                "[[sip.trunks]]\nname = \"c\"\ngateway = \"127.0.0.1:5080\"\nnumber_format = {{ kind = \"{kind}\", credential = 1 }}\n"
            );
            jail.create_file("bad.toml", &text)?;
            match Config::load(Some(Path::new("bad.toml")), Config::env()) {
                Ok(_) => Err(format!("a stray key beside kind {kind} was accepted").into()),
                Err(e) => {
                    let msg = format!("{e:#}");
                    assert!(msg.contains("credential"), "{kind}: {msg}");
                    Ok(())
                }
            }
        });
    }
}

/// A trunk's `codecs` are written by their encoding names, most preferred first; the
/// default takes G.722 when a caller prefers it, and a list the media side cannot serve
/// stops the start.
#[test]
fn a_trunk_names_its_codecs_in_order_of_preference() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "c.toml",
            "[[sip.trunks]]\nname = \"pbx\"\ngateway = \"127.0.0.1:5080\"\ncodecs = [\"G722\", \"PCMU\"]\n\
             [[sip.trunks]]\nname = \"carrier\"\ngateway = \"127.0.0.1:5081\"\n",
        )?;
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        let sip = c.sip.to_sip().map_err(|e| e.to_string())?;
        use callsmith_sip::SdpCodec::*;
        assert_eq!(sip.trunks[0].codecs, [G722, Pcmu]);
        assert_eq!(sip.trunks[1].codecs, [Pcmu, Pcma, G722]);
        jail.create_file(
            "bad.toml",
            "[[sip.trunks]]\nname = \"pbx\"\ngateway = \"127.0.0.1:5080\"\ncodecs = []\n",
        )?;
        let c =
            Config::load(Some(Path::new("bad.toml")), Config::env()).map_err(|e| e.to_string())?;
        let e = c.sip.to_sip().unwrap_err().to_string();
        assert!(e.contains("\"pbx\" has an empty codecs list"), "{e}");
        jail.create_file(
            "unknown.toml",
            "[[sip.trunks]]\nname = \"pbx\"\ngateway = \"127.0.0.1:5080\"\ncodecs = [\"G729\"]\n",
        )?;
        let e = Config::load(Some(Path::new("unknown.toml")), Config::env()).unwrap_err();
        assert!(e.to_string().contains("G729"), "{e}");
        Ok(())
    });
}
