//! White-box canaries for a one-run audit (`dp_engine::privacy`), placed where the run's
//! mechanism puts its smallest noise, from a step computed before any canary counts.

use burn::module::Module;
use burn::tensor::Device;
use dp_engine::error::{EngineError, Result};
use dp_engine::lots::Batching;
use dp_engine::lots::{LotSource, mean_gradient};
use dp_engine::privacy::Plan;
use dp_engine::privacy::PrivacyConfig;
use dp_engine::step::canaries::WhiteBoxCanaries;

/// `count` canaries for the run of `privacy` and `plan` on `model` and `source`, placed on the
/// noise of a step computed before any canary counts. Refused for the baseline, which releases
/// no noise.
pub(crate) fn place<M: Module>(
    count: usize,
    (privacy, plan): (&PrivacyConfig, &Plan),
    model: &M,
    source: &dyn LotSource<M>,
    (batching, device): (Batching, &Device),
) -> Result<WhiteBoxCanaries> {
    let table = &privacy.table(model)?;
    let Some(z) = plan.z else {
        return Err(EngineError::invalid(
            "audit",
            "white-box canaries are scored on the noisy release: the mechanism none releases no noise",
        ));
    };
    let inference = model.valid();
    let noise = privacy
        .mechanism
        .allocation(z, &privacy.settings, table)
        .step_noise(0, table, &mut || mean_gradient(&inference, source, batching, table, device))?;
    let sizes: Vec<usize> = table.params().iter().map(|p| p.len()).collect();
    let bound = plan.clipping.layer_bound(privacy.settings.clip_norm, table.layers().len());
    WhiteBoxCanaries::for_run(count, plan.sample_rate, privacy.settings.seed, &noise.scales, &sizes, bound)
}
