// libFuzzer target: the bootstrap stream parser (proto::FrameReader) plus message_decode on
// every frame it returns.
//
// Input layout: 4 control bytes, then the byte stream as it would arrive on the bootstrap
// TCP connection (u32 LE length prefix + message, repeated).
//   control[0] bit 0: "exact" mode, as Socket::message_recv reads: offer at most wanted()
//                     bytes at a time; otherwise offer whole chunks and feed the rest of a
//                     chunk again after next(), as the FrameReader contract allows.
//              bit 1: call next() a second time after each call (idempotence).
//              bit 2: chunk sizes are multiplied by 257 (large reads).
//   control[1..3]:    chunk sizes, used in turn; 0 means "everything that is left".
//
// Invariants checked (abort on violation):
//  - feed() never consumes more than it is offered; in exact mode it consumes all of it;
//  - a returned frame has kHeaderSize <= size <= kMaxFrame, and the frames and the final
//    error (EMSGSIZE for a prefix over kMaxFrame, EPROTO for one under kHeaderSize) are
//    exactly those of a straightforward reference parse of the stream;
//  - the reader never gets stuck (no bytes taken, no frame, no error, bytes pending);
//  - after an error, next() keeps failing, feed() takes nothing and wanted() is 0;
//  - message_decode of a frame never crashes, and a decoded frame has the encoded size.
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "rpcie/protocol.hpp"

namespace {

using namespace rpcie;
using Bytes = std::span<const std::uint8_t>;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "frame_fuzz: invariant violated: %s\n", what);
  std::abort();
}

void check(bool ok, const char* what) {
  if (!ok) die(what);
}

// What a correct reader must produce for `stream`.
struct Expected {
  std::vector<Bytes> frames;
  int error = 0;  // 0, EMSGSIZE or EPROTO
};

Expected reference_parse(Bytes stream) {
  Expected e;
  std::size_t p = 0;
  while (stream.size() - p >= proto::kFramePrefix) {
    std::uint32_t len = 0;
    for (std::size_t i = 0; i < proto::kFramePrefix; ++i) len |= static_cast<std::uint32_t>(stream[p + i]) << (8 * i);
    if (len > proto::kMaxFrame) {
      e.error = EMSGSIZE;
      break;
    }
    if (len < proto::kHeaderSize) {
      e.error = EPROTO;
      break;
    }
    if (stream.size() - p - proto::kFramePrefix < len) break;  // incomplete tail
    e.frames.push_back(stream.subspan(p + proto::kFramePrefix, len));
    p += proto::kFramePrefix + len;
  }
  return e;
}

class Driver {
 public:
  Driver(Bytes stream, const std::uint8_t control[4]) : stream_(stream), expected_(reference_parse(stream)) {
    exact_ = (control[0] & 1) != 0;
    twice_ = (control[0] & 2) != 0;
    scale_ = (control[0] & 4) != 0 ? 257 : 1;
    for (int i = 0; i < 3; ++i) chunks_[i] = control[i + 1];
  }

  void run() {
    if (exact_)
      run_exact();
    else
      run_chunked();
    finish();
  }

 private:
  std::size_t chunk_next() {
    std::size_t c = chunks_[turn_++ % 3];
    std::size_t left = stream_.size() - pos_;
    return c == 0 ? left : std::min(c * scale_, left);
  }

  // Calls next() (twice if asked) and records the outcome. Returns true if the reader has
  // failed (the run is over).
  bool poll(bool* got_frame) {
    auto r = reader_.next();
    *got_frame = false;
    if (!r) {
      error_ = r.error().code;
      return true;
    }
    if (!r->empty()) {
      *got_frame = true;
      frame_check(*r);
    }
    if (twice_) {
      auto again = reader_.next();
      check(again.has_value(), "a second next() failed where the first did not");
      check(again->empty(), "a second next() returned another frame without a feed()");
    }
    return false;
  }

  void frame_check(Bytes frame) {
    check(frame.size() >= proto::kHeaderSize, "frame shorter than a message header");
    check(frame.size() <= proto::kMaxFrame, "frame longer than kMaxFrame");
    check(frames_ < expected_.frames.size(), "more frames than the stream holds");
    Bytes want = expected_.frames[frames_];
    check(frame.size() == want.size() && std::memcmp(frame.data(), want.data(), want.size()) == 0,
          "frame differs from the stream's frame");
    ++frames_;
    auto d = proto::message_decode(frame);
    if (d) check(proto::message_encoded_size(d->message) == frame.size(), "decoded frame has another encoded size");
  }

  // Whole chunks; the unconsumed rest of a chunk is fed again after next().
  void run_chunked() {
    while (pos_ < stream_.size()) {
      Bytes offered = stream_.subspan(pos_, chunk_next());
      while (!offered.empty()) {
        std::size_t used = reader_.feed(offered);
        check(used <= offered.size(), "feed consumed more than offered");
        pos_ += used;
        offered = offered.subspan(used);
        bool frame = false;
        if (poll(&frame)) return;
        if (used == 0 && !frame) die("stuck: feed() took nothing and next() has neither a frame nor an error");
      }
    }
  }

  // As Socket::message_recv: next(); if nothing, read exactly min(wanted(), chunk) bytes.
  void run_exact() {
    int idle = 0;
    for (;;) {
      bool frame = false;
      if (poll(&frame)) return;
      if (frame) {
        idle = 0;
        continue;
      }
      if (pos_ == stream_.size()) return;
      std::size_t want = std::min(reader_.wanted(), chunk_next());
      Bytes offered = stream_.subspan(pos_, want);
      std::size_t used = reader_.feed(offered);
      check(used == offered.size(), "feed of at most wanted() bytes did not take them all");
      pos_ += used;
      idle = used == 0 ? idle + 1 : 0;
      // One empty read is how a reused reader moves past a delivered frame; more would spin.
      if (idle > 2) die("stuck: wanted() is 0 but next() has neither a frame nor an error");
    }
  }

  void finish() {
    if (error_ == 0) {
      bool frame = false;
      if (poll(&frame)) {
        // An error found only at the end: the prefix was complete.
      }
    }
    check(frames_ == expected_.frames.size(), "reader returned fewer frames than the stream holds");
    check(error_ == expected_.error, "reader's error differs from the reference (wrong code, missing or spurious)");
    if (error_ != 0) {
      for (int i = 0; i < 2; ++i) {
        auto r = reader_.next();
        check(!r.has_value(), "next() succeeded after the stream failed");
      }
      static const std::uint8_t junk[8] = {8, 0, 0, 0, 0, 0, 0, 0};
      check(reader_.feed(junk) == 0, "feed() took bytes after the stream failed");
      check(reader_.wanted() == 0, "wanted() is not 0 after the stream failed");
      check(!reader_.next().has_value(), "next() succeeded after feed() on a failed stream");
    }
  }

  Bytes stream_;
  Expected expected_;
  proto::FrameReader reader_;
  bool exact_ = false;
  bool twice_ = false;
  std::size_t scale_ = 1;
  std::size_t chunks_[3] = {};
  std::size_t turn_ = 0;
  std::size_t pos_ = 0;
  std::size_t frames_ = 0;
  int error_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint8_t control[4] = {};
  std::size_t head = std::min<std::size_t>(size, 4);
  if (head) std::memcpy(control, data, head);
  Bytes stream(data + head, size - head);
  Driver(stream, control).run();
  return 0;
}
