//! `/metrics`: the library's metrics (and nothing else) in Prometheus's text format, from a
//! recorder installed for the process when `--metrics` is given.
//!
//! The exporter renders on request; no listener or thread of its own. Histograms are real
//! Prometheus histograms with buckets from 100 µs to 10 s, so `histogram_quantile` works;
//! names follow Prometheus's conventions (`db_client_operation_duration_seconds`,
//! `agent_memory_conflicts_total`).

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

use crate::exit::{CliError, CliResult};

/// The path the metrics are served at.
pub const PATH: &str = "/metrics";

/// Upper bounds of the duration histogram's buckets, in seconds.
const DURATION_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// How often the exporter's histograms are compacted.
const UPKEEP: Duration = Duration::from_secs(5);

/// Where `--metrics` serves: beside `/mcp`, or on an address of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsAt {
    /// `/metrics` on the MCP server's own address.
    Beside,
    /// `/metrics` on a separate plain-HTTP listener (`--metrics-listen`).
    Separate(SocketAddr),
}

/// Installs the Prometheus recorder for the process, describes the library's metrics to it,
/// and keeps its histograms compacted until `stop`.
///
/// # Errors
/// `Failure` when a recorder is already installed.
pub fn install(stop: CancellationToken) -> CliResult<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .with_recommended_naming(true)
        .set_buckets_for_metric(
            Matcher::Full(agent_memory::observe::OPERATION_DURATION.to_owned()),
            &DURATION_BUCKETS,
        )
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|err| CliError::failure(format!("cannot set up the metrics: {err}")))?;
    agent_memory::observe::describe_metrics();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(UPKEEP);
        loop {
            tokio::select! {
                _ = ticks.tick() => upkeep.run_upkeep(),
                () = stop.cancelled() => return,
            }
        }
    });
    Ok(handle)
}

/// The router with `GET /metrics` only.
pub fn router(handle: PrometheusHandle) -> Router {
    Router::new().route(PATH, get(render)).with_state(handle)
}

async fn render(State(handle): State<PrometheusHandle>) -> impl IntoResponse {
    ([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], handle.render())
}
