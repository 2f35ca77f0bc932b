// The storage template's own test, through the host as any reel program reaches storage: a URI
// with the mem:// scheme goes to the plugin; what is written reads back, and globbing finds it.
// usage: storage_plugin_test PATH/TO/libreel_template_storage.so
#include <cstdio>

#include "reel/core/host.h"

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]), 2;
  auto host = reel::core::Host::Create({.plugin_files = {argv[1]}, .load_plugins = false});
  if (!host.ok()) return std::fprintf(stderr, "%s\n", host.status().ToString().c_str()), 1;
  auto storage = (*host)->storage().ForUri("mem://bucket/a.txt");
  if (!storage.ok()) return std::fprintf(stderr, "%s\n", storage.status().ToString().c_str()), 1;
  if (!reel::WriteAll(**storage, "mem://bucket/a.txt", "hello").ok()) return 1;
  auto back = reel::ReadAll(**storage, "mem://bucket/a.txt");
  auto listed = (*storage)->Glob("mem://bucket/*.txt");
  if (!back.ok() || *back != "hello" || !listed.ok() || listed->size() != 1) return 1;
  auto missing = reel::ReadAll(**storage, "mem://bucket/b.txt");
  std::printf("read '%s'; missing: %s\n", back->c_str(), missing.status().ToString().c_str());
  return missing.status().code() == reel::StatusCode::kNotFound ? 0 : 1;
}
