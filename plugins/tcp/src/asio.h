// The parts of Boost.Asio the tcp plugin uses, in one place.
#ifndef REEL_PLUGINS_TCP_SRC_ASIO_H_
#define REEL_PLUGINS_TCP_SRC_ASIO_H_

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>, so <utility> must
// come first.
// clang-format off
#include <utility>
// clang-format on
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>

namespace reel::tcp {
namespace asio = boost::asio;
using asio::ip::tcp;
}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_ASIO_H_
