//! Which devices this process has, decided once at first use.
//!
//! Simulated devices when the process asks for them (environment variable
//! `TA_SIMULATED_DEVICES=n`, or [`simulate`] before the first device use);
//! otherwise whatever the CUDA driver reports, if it loads. A machine without
//! a driver or GPU gets an empty list and a reason, never a crash.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::cuda::probe;
use super::interface::Device;
#[cfg(any(test, feature = "internals"))]
use super::sim::control::{find, SimControl};
use super::sim::device::SimDevice;
use crate::error::{Error, Result, Status};

/// The environment variable that selects simulated devices (a count, 1..=16).
pub const SIMULATED_DEVICES_ENV: &str = "TA_SIMULATED_DEVICES";

/// Settings of simulated devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// How many devices.
    pub devices: u32,
    /// Streams per device.
    pub streams: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { devices: 2, streams: 4 }
    }
}

struct Registry {
    devices: Vec<Arc<dyn Device>>,
    /// Why there are no devices (when `devices` is empty).
    why_none: String,
    simulated: bool,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();
static SIM_REQUEST: Mutex<Option<SimConfig>> = Mutex::new(None);

fn sim_from_env() -> Option<SimConfig> {
    let v = std::env::var(SIMULATED_DEVICES_ENV).ok()?;
    let n: u32 = v.trim().parse().ok().filter(|n| (1..=16).contains(n))?;
    Some(SimConfig { devices: n, ..SimConfig::default() })
}

fn registry() -> &'static Registry {
    REGISTRY.get_or_init(|| {
        let request = SIM_REQUEST.lock().clone().or_else(sim_from_env);
        if let Some(cfg) = request {
            let devices =
                (0..cfg.devices).map(|i| Arc::new(SimDevice::new(i, cfg.streams)) as Arc<dyn Device>).collect();
            return Registry { devices, why_none: String::new(), simulated: true };
        }
        match probe() {
            Ok(list) if !list.is_empty() => Registry { devices: list, why_none: String::new(), simulated: false },
            Ok(_) => {
                Registry { devices: vec![], why_none: "the CUDA driver reports no devices".into(), simulated: false }
            }
            Err(why) => Registry { devices: vec![], why_none: why, simulated: false },
        }
    })
}

/// Use simulated devices in this process (for tests and for trying device
/// code on machines without a GPU). Must come before the first device use;
/// returns whether the process uses simulated devices with this
/// configuration (true again for a repeated identical request).
pub fn simulate(config: SimConfig) -> bool {
    let mut req = SIM_REQUEST.lock();
    if let Some(r) = REGISTRY.get() {
        return r.simulated && req.as_ref() == Some(&config);
    }
    if config.devices == 0 || config.devices > 16 || config.streams == 0 {
        return false;
    }
    *req = Some(config);
    drop(req);
    registry().simulated
}

/// Whether this process's devices are simulated.
pub fn is_simulated() -> bool {
    registry().simulated
}

/// How many devices there are; `Status::CudaUnavailable`, with the reason,
/// when there are none.
pub fn device_count() -> Result<usize> {
    let r = registry();
    if r.devices.is_empty() {
        return Err(Error::new(
            Status::CudaUnavailable,
            "cuda_device_count",
            format!("CUDA is not available: {}", r.why_none),
        ));
    }
    Ok(r.devices.len())
}

/// A description of the device with this ordinal (kind, name, memory), or
/// why there is none.
pub fn device_info(ordinal: u32) -> Result<String> {
    device(ordinal).map(|d| d.describe())
}

/// The device with this ordinal, or why there is none.
pub(crate) fn device(ordinal: u32) -> Result<Arc<dyn Device>> {
    let r = registry();
    if r.devices.is_empty() {
        return Err(Error::new(
            Status::CudaUnavailable,
            "cuda",
            format!("CUDA device {ordinal} is not available: {}", r.why_none),
        ));
    }
    r.devices.get(ordinal as usize).cloned().ok_or_else(|| {
        Error::new(
            Status::CudaUnavailable,
            "cuda",
            format!("there is no CUDA device {ordinal} ({} present)", r.devices.len()),
        )
    })
}

/// The controls of simulated device `ordinal`, or None if this process does
/// not use simulated devices or has no such device.
///
/// Devices come into being when the device registry is first used (for
/// example [`simulate`]); when [`SIMULATED_DEVICES_ENV`] is set, this
/// function initialises the registry itself.
#[cfg(any(test, feature = "internals"))]
pub fn control(ordinal: u32) -> Option<Arc<SimControl>> {
    if let Some(c) = find(ordinal) {
        return Some(c);
    }
    if std::env::var_os(SIMULATED_DEVICES_ENV).is_some() {
        // With the variable set, the registry makes simulated devices (or has
        // already decided); either way this cannot load a driver that the
        // process did not ask for.
        is_simulated();
        return find(ordinal);
    }
    None
}
