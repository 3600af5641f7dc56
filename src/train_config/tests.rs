use super::*;

/// The settings of `pairs`, as flags would give them.
fn given(pairs: Value) -> Settings {
    TrainConfig::settings_of(&pairs).unwrap()
}

#[test]
fn settings_given_replace_the_configurations_and_leave_the_rest() {
    let file = TrainConfig { target_epsilon: Some(3.0), lot_size: 512, ..TrainConfig::default() };
    let config = file
        .overlaid(&given(serde_json::json!({"noise_multiplier": 1.1, "ls_sigma": 2.0, "mechanism": "ls-sgd"})))
        .unwrap();
    assert_eq!((config.noise_multiplier, config.target_epsilon), (Some(1.1), None));
    assert_eq!((config.lot_size, config.mechanism), (512, MechanismName::LsSgd));
    assert_eq!(config.mechanism_options.get("ls_sigma"), Some(&toml::Value::Float(2.0)));
    let back = config.overlaid(&given(serde_json::json!({"target_epsilon": 2.0}))).unwrap();
    assert_eq!((back.noise_multiplier, back.target_epsilon), (None, Some(2.0)));
    assert_eq!(TrainConfig::default().overlaid(&Settings::new()).unwrap(), TrainConfig::default());
}

#[test]
fn a_setting_no_mechanism_reads_or_of_the_wrong_type_is_refused() {
    let refused = |settings: Value| TrainConfig::default().overlaid(&given(settings)).unwrap_err().to_string();
    let wrong_mechanism = refused(serde_json::json!({"ls_sigma": 2.0}));
    assert!(wrong_mechanism.contains("not to the gaussian mechanism"), "{wrong_mechanism}");
    let unknown = refused(serde_json::json!({"epoch": 3, "mechanism": "ls-sgd"}));
    assert!(unknown.contains("`epoch` is not a setting of a run, nor an option of any mechanism"), "{unknown}");
    let mistyped = refused(serde_json::json!({"sensitivity_every": "often", "mechanism": "optimized-paper"}));
    assert!(mistyped.starts_with("invalid mechanism option") && !mistyped.contains('\n'), "{mistyped}");
    let wrong_type = refused(serde_json::json!({"lot_size": "many"}));
    assert!(wrong_type.starts_with("invalid settings") && wrong_type.contains("\"many\""), "{wrong_type}");
}

#[test]
fn a_resume_changes_what_differs_but_not_the_device_seed_or_folder() {
    let run = TrainConfig { target_epsilon: Some(3.0), ..TrainConfig::default() };
    let moved =
        TrainConfig { device: DeviceChoice::Cpu, seed: Some(7), out_dir: PathBuf::from("elsewhere"), ..run.clone() };
    assert_eq!(run.changes(&moved).unwrap(), Vec::new());
    let asked =
        run.overlaid(&given(serde_json::json!({"noise_multiplier": 1.0, "lot_size": 512, "delta": 1e-6}))).unwrap();
    let change = |key: &str, run_has: &str, given: Option<&str>| Change {
        key: key.into(),
        run_has: run_has.into(),
        given: given.map(Into::into),
    };
    assert_eq!(
        run.changes(&asked).unwrap(),
        vec![
            change("delta", "0.00001", Some("0.000001")),
            change("lot_size", "256", Some("512")),
            change("noise_multiplier", "none", Some("1.0")),
            change("target_epsilon", "3.0", None),
        ]
    );
}
