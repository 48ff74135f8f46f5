#include "metrics/metrics.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include "metrics/http_server.h"

namespace slip::metrics {
namespace {

using nlohmann::json;

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

TEST(MetricsTest, NamedSeriesHaveTypesLabelsAndUnits) {
  Histogram put;
  for (int i = 0; i < 90; ++i) put.Record(150'000);   // 150 us
  for (int i = 0; i < 10; ++i) put.Record(3'000'000);  // 3 ms
  const json stats = {
      {"node", 2},
      {"design", "rowan-kv"},
      {"cpu_ns", {{"worker", 1'500'000'000}, {"nic", 0}, {"clean", 3'000'000'000}, {"flush", 1'000'000'000}}},
      {"puts", 100},
      {"gets", 7},
      {"errors", {{"stale_term", 3}}},
      {"latency_ns", {{"put", HistogramJson(put)}}},
      {"term", 9},
      {"lease_ms_left", 1500},
      {"in_flight_writes", 4},
      {"received_bytes", 4096},
      {"store", {{"segments", {{"free", 10}, {"used", 2}}}, {"appended_bytes", 8192}, {"keys", 55}, {"num_segments", 12}}},
      {"recovery", {{"entries", 77}}},
      {"shard_load", {5, 6}},
      {"auth", {{"on", true}, {"current", 1}}},
      {"moves_in_progress", json::array()},
  };
  const std::string t = PrometheusText(stats, {{"slip_resp_commands_total", "counter", "RESP commands run", {{"", 12}}}});
  EXPECT_TRUE(Has(t, "# TYPE slip_node_info gauge"));
  EXPECT_TRUE(Has(t, "slip_node_info{node=\"2\",design=\"rowan-kv\"} 1"));
  EXPECT_TRUE(Has(t, "# TYPE slip_cpu_seconds_total counter"));
  EXPECT_TRUE(Has(t, "slip_cpu_seconds_total{role=\"worker\"} 1.5"));
  EXPECT_TRUE(Has(t, "slip_cpu_seconds_total{role=\"clean\"} 3"));
  // RubbleDB's flushes are part of "clean": not a role a sum would count twice.
  EXPECT_EQ(t.find("role=\"flush\""), std::string::npos);
  EXPECT_TRUE(Has(t, "slip_lsm_cpu_seconds_total{work=\"flush\"} 1"));
  EXPECT_TRUE(Has(t, "slip_operations_total{op=\"put\"} 100"));
  EXPECT_TRUE(Has(t, "slip_operations_total{op=\"get\"} 7"));
  EXPECT_TRUE(Has(t, "slip_request_errors_total{reason=\"stale_term\"} 3"));
  EXPECT_TRUE(Has(t, "# TYPE slip_request_duration_seconds histogram"));
  EXPECT_TRUE(Has(t, "slip_request_duration_seconds_bucket{op=\"put\",le=\"0.0001\"} 0"));
  EXPECT_TRUE(Has(t, "slip_request_duration_seconds_bucket{op=\"put\",le=\"0.0002\"} 90"));
  EXPECT_TRUE(Has(t, "slip_request_duration_seconds_bucket{op=\"put\",le=\"0.005\"} 100"));
  EXPECT_TRUE(Has(t, "slip_request_duration_seconds_bucket{op=\"put\",le=\"+Inf\"} 100"));
  EXPECT_TRUE(Has(t, "slip_request_duration_seconds_count{op=\"put\"} 100"));
  EXPECT_TRUE(Has(t, "slip_term 9"));
  EXPECT_TRUE(Has(t, "slip_lease_seconds_left 1.5"));
  EXPECT_TRUE(Has(t, "slip_in_flight_writes 4"));
  EXPECT_TRUE(Has(t, "slip_backup_received_bytes_total 4096"));
  EXPECT_TRUE(Has(t, "slip_segments{state=\"free\"} 10"));
  EXPECT_TRUE(Has(t, "slip_store_appended_bytes_total 8192"));
  EXPECT_TRUE(Has(t, "slip_keys 55"));
  EXPECT_TRUE(Has(t, "slip_store_num_segments 12"));
  EXPECT_TRUE(Has(t, "slip_recovery_entries 77"));
  EXPECT_TRUE(Has(t, "slip_shard_load{index=\"1\"} 6"));
  EXPECT_TRUE(Has(t, "slip_auth_on 1"));
  EXPECT_TRUE(Has(t, "slip_resp_commands_total 12"));
  // Every sample line is a slip_* series; each family is declared once.
  size_t types = 0, helps = 0;
  for (size_t at = 0; at < t.size();) {
    const size_t nl = t.find('\n', at);
    const std::string line = t.substr(at, nl - at);
    at = nl + 1;
    if (line.starts_with("# TYPE")) ++types;
    if (line.starts_with("# HELP")) ++helps;
    if (!line.starts_with("#")) {
      EXPECT_TRUE(line.starts_with("slip_")) << line;
    }
  }
  EXPECT_EQ(types, helps);
  EXPECT_EQ(t.find("# TYPE slip_operations_total"), t.rfind("# TYPE slip_operations_total"));
}

TEST(MetricsTest, QuantilesBetweenSnapshots) {
  Histogram h;
  const json empty = HistogramJson(h);
  EXPECT_EQ(QuantileBetween(nullptr, empty, 0.5), -1);
  for (int i = 0; i < 100; ++i) h.Record(150'000);
  const json first = HistogramJson(h);
  for (int i = 0; i < 100; ++i) h.Record(30'000'000);  // 30 ms
  const json second = HistogramJson(h);
  // Since the start: half fast, half slow.
  const double p25 = QuantileBetween(nullptr, second, 0.25);
  EXPECT_GT(p25, 100'000);
  EXPECT_LE(p25, 200'000);
  // Between the snapshots only the slow ones.
  const double p50 = QuantileBetween(first, second, 0.5);
  EXPECT_GT(p50, 20'000'000);
  EXPECT_LE(p50, 50'000'000);
  EXPECT_EQ(QuantileBetween(second, second, 0.5), -1);
}

TEST(HttpServerTest, ServesRoutesAndRefusesOthers) {
  int calls = 0;
  auto s = HttpServer::Start("127.0.0.1", 0,
                             {{"/metrics", [&] {
                                 ++calls;
                                 return Page{.status = 200, .content_type = "text/plain; version=0.0.4", .body = "slip_x 1\n"};
                               }}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  httplib::Client c("127.0.0.1", (*s)->port());
  auto r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "slip_x 1\n");
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  auto missing = c.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(calls, 1);
  // A port in use is a clear error.
  auto again = HttpServer::Start("127.0.0.1", (*s)->port(), {});
  EXPECT_FALSE(again.ok());
}

}  // namespace
}  // namespace slip::metrics
