// Conformance of the plugin loader: every way a file can be wrong gets a one-line reason naming it,
// nothing is half-registered, nothing crashes; good plugins work and stay loaded under their
// objects.
#include "reel/core/plugin_loader.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/filesystem.hpp>
#include <filesystem>
#include <fstream>

#include "reel/core/host.h"
#include "reel/core/registry.h"

namespace reel::core {
namespace {

namespace fs = boost::filesystem;

std::string PluginDir(const std::string& scenario) {
  return std::string(REEL_TEST_PLUGIN_DIR) + "/" + scenario;
}
std::string PluginFile(const std::string& scenario, const std::string& name) {
  return PluginDir(scenario) + "/libreel_" + name + ".so";
}

class PluginLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(registry_.RegisterBuiltins().ok()); }
  Registry registry_;
  PluginLoader loader_{registry_};
};

TEST_F(PluginLoaderTest, LoadsAGoodPluginAndItsComponents) {
  ASSERT_TRUE(loader_.LoadFile(PluginFile("good", "test_good")).ok());
  ASSERT_EQ(loader_.loaded().size(), 1u);
  const LoadedPlugin& p = loader_.loaded()[0];
  EXPECT_EQ(p.name, "good");
  EXPECT_EQ(p.version, "1.2.3");
  EXPECT_EQ(p.sdk_version, REEL_SDK_VERSION);
  EXPECT_EQ(p.components, (std::vector<std::string>{"storage greeting", "model echo_model",
                                                    "model throwing_model", "command hello"}));
  const ComponentEntry* e = registry_.Find(ComponentKind::kModel, "echo_model");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->provider, "good");
  ASSERT_EQ(e->info.options.size(), 1u);
  EXPECT_EQ(e->info.options[0].name, "scale");
}

TEST_F(PluginLoaderTest, ObjectsWorkAcrossTheBoundaryAndKeepTheLibraryLoaded) {
  Owned<Model> model{nullptr, {}};
  ParamArena arena;
  {
    Registry registry;
    PluginLoader loader(registry);
    ASSERT_TRUE(loader.LoadFile(PluginFile("good", "test_good")).ok());
    auto made = registry.CreateModel("echo_model", {{"scale", "3"}}, ModelContext{4});
    ASSERT_TRUE(made.ok()) << made.status();
    model = std::move(*made);
  }  // the registry and loader are gone; only the model holds the library now
  ASSERT_TRUE(model->DeclareParams(arena).ok());
  arena.Finalize();
  ASSERT_TRUE(model->Initialize(1).ok());
  Batch batch;
  batch.ids = {"v"};
  batch.label_offsets = {0, 0};
  batch.features["x"] = Feature{Tensor({1, 1, 1}, std::vector<float>{5.0f}), {1}};
  auto logits = model->Forward(batch, Mode::kInfer);
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_EQ(logits->shape(), (Shape{1, 4}));
  EXPECT_FLOAT_EQ(logits->data()[3], 15.0f);
  // Errors made inside the plugin come back as Status, naming the feature.
  batch.features.clear();
  auto missing = model->Forward(batch, Mode::kInfer);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'x'"), std::string::npos);
}

TEST_F(PluginLoaderTest, OptionsAreValidatedAgainstTheSchema) {
  ASSERT_TRUE(loader_.LoadFile(PluginFile("good", "test_good")).ok());
  auto unknown = registry_.CreateModel("echo_model", {{"scael", "3"}}, {});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown option 'scael'"), std::string::npos)
      << unknown.status();
  EXPECT_NE(unknown.status().message().find("known: scale"), std::string::npos);
  auto wrong_type = registry_.CreateModel("echo_model", {{"scale", "three"}}, {});
  EXPECT_EQ(wrong_type.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_type.status().message().find("'three' is not an int"), std::string::npos)
      << wrong_type.status();
  auto rejected = registry_.CreateModel("echo_model", {{"scale", "-1"}}, {});
  EXPECT_NE(rejected.status().message().find("model 'echo_model'"), std::string::npos)
      << rejected.status();
}

TEST_F(PluginLoaderTest, AnExceptionInAFactoryBecomesAnError) {
  ASSERT_TRUE(loader_.LoadFile(PluginFile("good", "test_good")).ok());
  auto made = registry_.CreateModel("throwing_model", {}, {});
  EXPECT_EQ(made.status().code(), StatusCode::kInternal);
  EXPECT_NE(made.status().message().find("boom"), std::string::npos) << made.status();
}

TEST_F(PluginLoaderTest, OnlyTheEntrySymbolIsExported) {
  void* handle = dlopen(PluginFile("good", "test_good").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  EXPECT_NE(dlsym(handle, kPluginEntrySymbol), nullptr);
  EXPECT_EQ(dlsym(handle, "_Z27reel_test_internal_functionv"), nullptr);
  dlclose(handle);
}

TEST_F(PluginLoaderTest, RejectsAFileThatIsNotASharedLibrary) {
  fs::path dir = fs::temp_directory_path() / fs::unique_path("reel-notlib-%%%%%%");
  fs::create_directories(dir);
  std::string path = (dir / "libreel_fake.so").string();
  std::ofstream(path) << "this is a text file, not a library\n";
  Status s = loader_.LoadFile(path);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
  EXPECT_NE(s.message().find("not a shared library"), std::string::npos) << s;
  ASSERT_EQ(loader_.rejected().size(), 1u);
  EXPECT_EQ(loader_.rejected()[0].reason.find('\n'), std::string::npos);
  fs::remove_all(dir);
}

TEST_F(PluginLoaderTest, RejectsAnElfFileThatDoesNotLoad) {
  fs::path dir = fs::temp_directory_path() / fs::unique_path("reel-badelf-%%%%%%");
  fs::create_directories(dir);
  std::string path = (dir / "libreel_truncated.so").string();
  std::ifstream good(PluginFile("good", "test_good"), std::ios::binary);
  std::string bytes(200, '\0');
  good.read(bytes.data(), 200);
  std::ofstream(path, std::ios::binary) << bytes;  // an ELF header and nothing behind it
  Status s = loader_.LoadFile(path);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not loadable"), std::string::npos) << s;
  fs::remove_all(dir);
}

TEST_F(PluginLoaderTest, RejectsALibraryWithoutTheEntrySymbol) {
  Status s = loader_.LoadFile(PluginFile("no_entry", "test_no_entry"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no 'reel_plugin_entry' entry symbol"), std::string::npos) << s;
  EXPECT_NE(s.message().find("libreel_test_no_entry.so"), std::string::npos) << s;
}

TEST_F(PluginLoaderTest, RejectsAnotherAbiSdkOrRuntimeBeforeRunningPluginCode) {
  // Each of these plugins aborts if its registration function is ever called.
  struct Case {
    const char* scenario;
    const char* file;
    std::string reason;
  };
  for (const Case& c :
       {Case{"bad_1", "test_bad_descriptor_1",
             "plugin ABI version 999, this host speaks version " +
                 std::to_string(kPluginAbiVersion)},
        Case{"bad_2", "test_bad_descriptor_2", "built with SDK 7.0.0"},
        Case{"bad_3", "test_bad_descriptor_3", "built for C++ runtime 'runtime=libc++"}}) {
    Status s = loader_.LoadFile(PluginFile(c.scenario, c.file));
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << c.file;
    EXPECT_NE(s.message().find(c.reason), std::string::npos) << s;
    EXPECT_NE(s.message().find(c.file), std::string::npos) << s;
  }
  EXPECT_EQ(loader_.loaded().size(), 0u);
  EXPECT_EQ(loader_.rejected().size(), 3u);
}

TEST_F(PluginLoaderTest, DuplicateComponentNamesNameBothFilesAndRegisterNothing) {
  loader_.LoadDirectory(PluginDir("duplicates"));
  ASSERT_EQ(loader_.loaded().size(), 1u);
  ASSERT_EQ(loader_.rejected().size(), 1u);
  const RejectedFile& r = loader_.rejected()[0];
  EXPECT_NE(r.reason.find("model 'shared_name' is registered by both"), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find("libreel_test_dup_a.so"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("libreel_test_dup_b.so"), std::string::npos) << r.reason;
  // All or nothing: the rejected plugin's other, unique component is not registered.
  EXPECT_NE(registry_.Find(ComponentKind::kCommand, "dup_a_only"), nullptr);
  EXPECT_EQ(registry_.Find(ComponentKind::kCommand, "dup_b_only"), nullptr);
}

TEST_F(PluginLoaderTest, AnExceptionDuringRegistrationIsARejection) {
  Status s = loader_.LoadFile(PluginFile("throwing", "test_throwing"));
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("registration exploded"), std::string::npos) << s;
}

TEST_F(PluginLoaderTest, LoadingTheSameFileTwiceIsHarmless) {
  ASSERT_TRUE(loader_.LoadFile(PluginFile("good", "test_good")).ok());
  loader_.LoadDirectory(PluginDir("good"));
  EXPECT_EQ(loader_.loaded().size(), 1u);
  EXPECT_TRUE(loader_.rejected().empty());
}

TEST_F(PluginLoaderTest, AMissingFileIsNotFound) {
  Status s = loader_.LoadFile("/nonexistent/libreel_nothing.so");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/libreel_nothing.so"), std::string::npos);
}

TEST(PluginSearchPathTest, FlagsThenEnvironmentThenInstallDir) {
  setenv("REEL_PLUGIN_PATH", "/env/one:/env/two", 1);
  auto path = PluginLoader::DefaultSearchPath({"/flag/dir"});
  unsetenv("REEL_PLUGIN_PATH");
  ASSERT_EQ(path.size(), 4u);
  EXPECT_EQ(path[0], "/flag/dir");
  EXPECT_EQ(path[1], "/env/one");
  EXPECT_EQ(path[2], "/env/two");
  EXPECT_NE(path[3].find("lib/reel/plugins"), std::string::npos);
}

TEST(HostTest, UnknownComponentsListTheRegisteredOnes) {
  HostOptions options;
  options.load_plugins = false;
  auto host = Host::Create(options);
  ASSERT_TRUE(host.ok());
  auto made = (*host)->registry().CreateModel("no_such_model", {}, {});
  EXPECT_EQ(made.status().code(), StatusCode::kNotFound);
  EXPECT_NE(made.status().message().find("no model named 'no_such_model'"), std::string::npos)
      << made.status();
  auto storage = (*host)->ForUri("gs://bucket/key");
  EXPECT_EQ(storage.status().code(), StatusCode::kNotFound);
  EXPECT_NE(storage.status().message().find("registered: file"), std::string::npos)
      << storage.status();
}

// A run config's plugin_dirs: relative entries are relative to the config file's directory, the
// plugins there are registered, and a directory that is missing or holds a rejected file is an
// error naming it and the config line.
class ConfigPluginDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HostOptions o;
    o.load_plugins = false;
    auto h = Host::Create(o);
    ASSERT_TRUE(h.ok()) << h.status();
    host_ = std::move(*h);
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("reel_plugin_dirs_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Writes a config naming `plugin_dir` (relative to the config's directory) and loads it.
  Result<ConfigFile> Load(const std::string& plugin_dir) {
    std::ofstream(dir_ / "run.pbtxt") << "# a run\nplugin_dirs: \"" << plugin_dir << "\"\n";
    return LoadConfigFile(host_->storage(), (dir_ / "run.pbtxt").string());
  }
  std::string Relative(const std::string& scenario) {
    return std::filesystem::relative(PluginDir(scenario), dir_).string();
  }
  std::unique_ptr<Host> host_;
  std::filesystem::path dir_;
};

TEST_F(ConfigPluginDirsTest, RelativeToTheConfigFileAndLoaded) {
  auto cfg = Load(Relative("good"));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->config.plugin_dirs(0), (dir_ / Relative("good")).lexically_normal().string());
  EXPECT_EQ(host_->registry().Find(ComponentKind::kModel, "echo_model"), nullptr);
  ASSERT_TRUE(host_->ApplyRunConfig(*cfg).ok());
  EXPECT_NE(host_->registry().Find(ComponentKind::kModel, "echo_model"), nullptr);
  EXPECT_NE(host_->registry().Find(ComponentKind::kCommand, "hello"), nullptr);
}

TEST_F(ConfigPluginDirsTest, MissingDirectoryNamesItAndTheLine) {
  auto cfg = Load("no_such_dir");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  Status s = host_->ApplyRunConfig(*cfg);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find((dir_ / "run.pbtxt").string() + ":2"), std::string::npos) << s;
  EXPECT_NE(s.message().find((dir_ / "no_such_dir").string() + "' does not exist"),
            std::string::npos)
      << s;
}

TEST_F(ConfigPluginDirsTest, RejectedFileIsAnError) {
  auto cfg = Load(Relative("bad_1"));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  Status s = host_->ApplyRunConfig(*cfg);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("built for plugin ABI version 999"), std::string::npos) << s;
}

}  // namespace
}  // namespace reel::core
