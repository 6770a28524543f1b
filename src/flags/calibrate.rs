//! The flags of `heisenbench calibrate`.

/// `heisenbench calibrate`.
#[derive(Debug, clap::Args)]
pub struct CalibrateFlags {
    /// How long to measure each load.
    #[arg(long, default_value = "2s", value_parser = heisenbench_model::units::Seconds::parse_positive)]
    pub duration: heisenbench_model::units::Seconds,
    /// The loads to measure, requests per second of 200-token streams from the embedded
    /// mock (the cost per event falls as the load rises).
    #[arg(long, value_delimiter = ',', default_values = ["100", "500", "2000"])]
    pub qps: Vec<heisenbench_model::units::Rate>,
    /// Where to store the result (default: $HEISENBENCH_CALIBRATION or ~/.cache/heisenbench/calibration.json).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}
