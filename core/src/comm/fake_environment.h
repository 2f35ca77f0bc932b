// An environment for tests of code that reads variables through a GetEnv
// (reel/core/rank_environment.h): the given variables and nothing else. Header only, for *_test.cc.
#ifndef REEL_CORE_SRC_COMM_FAKE_ENVIRONMENT_H_
#define REEL_CORE_SRC_COMM_FAKE_ENVIRONMENT_H_

#include <map>
#include <memory>
#include <string>

#include "reel/core/rank_environment.h"

namespace reel::core::testing {

inline GetEnv FakeEnvironment(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace reel::core::testing

#endif  // REEL_CORE_SRC_COMM_FAKE_ENVIRONMENT_H_
