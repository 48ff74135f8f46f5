// The web view: one page (HTML, CSS and script, no external resources)
// that polls /api/cluster every second and shows the cluster's nodes, their
// state, terms and leases, live throughput and latency charts, and the
// shard map (docs/metrics.md "Web view").
#pragma once

namespace slip::cli {

const char* WebViewPage();

}  // namespace slip::cli
