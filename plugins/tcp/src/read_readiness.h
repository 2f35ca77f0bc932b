// Whether a socket tells its waiters (epoll, poll) that bytes arrived.
//
// A tcp collective that polls reads its left neighbour's connection itself (allreduce.cc), but the
// io thread's reactor still has that socket in its epoll set and wakes for every segment that
// arrives, only to find the connection borrowed and park again: two context switches per wake-up,
// on cores that the polling ranks keep busy (at 1 MiB on 2 ranks, about 4 per call). Muting raises
// the socket's receive low-water mark (SO_RCVLOWAT) above anything a call leaves queued, so the
// kernel reports it readable to nobody; reads with MSG_DONTWAIT still return whatever is there.
// Unmuting lowers it to 1 byte, and the kernel then wakes the waiters at once if bytes are queued
// (tcp_set_rcvlowat), so nothing is left unread behind an edge-triggered reactor's back.
//
// Linux caps the mark at half of net.ipv4.tcp_rmem's maximum and, when the socket's receive
// buffer is smaller than that mark needs, grows the buffer and clamps the window to the mark:
// the size that autotuning could reach anyway. A connection's end (EOF, reset) is reported
// whatever the mark; so is a nearly full receive window, so a muted socket never stalls its
// sender.
#ifndef REEL_PLUGINS_TCP_SRC_READ_READINESS_H_
#define REEL_PLUGINS_TCP_SRC_READ_READINESS_H_

namespace reel::tcp {

// Both return false if setsockopt failed (e.g. the socket is closed): the socket is then as it was.
bool MuteReadReadiness(int fd);
bool UnmuteReadReadiness(int fd);

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_READ_READINESS_H_
