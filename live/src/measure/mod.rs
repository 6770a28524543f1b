//! What this machine and this build allow, measured and kept.
//!
//! * [`floor`]: the loopback floor, the least observer overhead and read lag this machine
//!   allows (a writer and a reader that do nothing else).
//! * [`calibration`]: the generator's per-event cost as a curve over load, stored on disk,
//!   and the plans read off it.
//!
//! Uses [`crate::net`] and [`crate::time`]. Measuring a calibration runs the generator, so
//! that lives with it (`crate::generator::calibrate`), above this module.

pub mod calibration;
pub mod floor;
