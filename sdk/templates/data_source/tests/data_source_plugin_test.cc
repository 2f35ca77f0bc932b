// The data source template's own test: one epoch of example.txt in batches of 4 holds its 11
// videos once each, with their labels and values, and a malformed line is an error naming it.
// usage: data_source_plugin_test PATH/TO/libreel_template_data_source.so PATH/TO/example.txt
#include <cstdio>
#include <fstream>
#include <set>

#include "reel/core/host.h"

int main(int argc, char** argv) {
  if (argc != 3) return std::fprintf(stderr, "usage: %s PLUGIN.so example.txt\n", argv[0]), 2;
  auto host = reel::core::Host::Create({.plugin_files = {argv[1]}, .load_plugins = false});
  if (!host.ok()) return std::fprintf(stderr, "%s\n", host.status().ToString().c_str()), 1;
  reel::DataSourceContext ctx{.shard = {}, .seed = 1, .storage = &(*host)->storage()};
  auto source = (*host)->registry().CreateDataSource(
      "text_videos", {{"files", argv[2]}, {"batch_size", "4"}}, ctx);
  if (!source.ok()) return std::fprintf(stderr, "%s\n", source.status().ToString().c_str()), 1;
  std::set<std::string> ids;
  int batches = 0;
  for (auto batch = (*source)->Next(); batch.ok(); batch = (*source)->Next(), ++batches) {
    if (!reel::ValidateBatch(*batch, 3).ok()) return std::puts("invalid batch"), 1;
    ids.insert(batch->ids.begin(), batch->ids.end());
  }
  std::printf("%d batches, %zu videos\n", batches, ids.size());
  if (batches != 3 || ids.size() != 11) return 1;

  const std::string bad = std::string(argv[0]) + ".bad.txt";
  std::ofstream(bad) << "v1\t0\t0.1 0.2 0.3 0.4\nv2\t1\t0.5\n";
  auto refused = (*host)->registry().CreateDataSource("text_videos", {{"files", bad}}, ctx);
  std::printf("malformed: %s\n", refused.status().ToString().c_str());
  return refused.status().message().find(bad + ":2: 1 values, want 4") != std::string::npos ? 0 : 1;
}
