// frontend: what events files report (counts, link losses, a withdrawn device), the mask
// write, and the interrupt counts behind them (masking, reconnects).
#include <doctest/doctest.h>

#include <poll.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "events.hpp"
#include "interrupt_counts.hpp"

using namespace rpcie::hostd;
using Kind = EventsNews::Kind;

TEST_CASE("events read: a count is reported once, then the reader waits for the next") {
  EventsCursor c{5, 0};
  CHECK(events_news_take(c, false, 0, 5).kind == Kind::none);  // nothing since open
  auto n = events_news_take(c, false, 0, 8);
  CHECK(n.kind == Kind::count);
  CHECK(n.count == 8);
  CHECK(events_news_take(c, false, 0, 8).kind == Kind::none);
  CHECK(events_news_take(c, false, 0, 9).count == 9);
}

TEST_CASE("events read: a link loss since the open is reported for good, whatever counts come after") {
  EventsCursor c{5, 0};
  CHECK(events_news_take(c, false, 1, 7).kind == Kind::lost);
  CHECK(events_news_take(c, false, 1, 7).kind == Kind::lost);  // the device came back reset
  CHECK(events_news_take(c, false, 1, 8).kind == Kind::lost);  // its counts are not this file's
  CHECK(events_news_take(c, false, 2, 8).kind == Kind::lost);
  EventsCursor reopened{8, 2};  // a file opened after the losses counts again
  CHECK(events_news_take(reopened, false, 2, 8).kind == Kind::none);
  CHECK(events_news_take(reopened, false, 2, 9).count == 9);
}

TEST_CASE("events read: a withdrawn device answers for good, before any count") {
  EventsCursor c{5, 0};
  CHECK(events_news_take(c, true, 1, 9).kind == Kind::gone);
  CHECK(events_news_take(c, true, 1, 9).kind == Kind::gone);
}

TEST_CASE("events poll: readable exactly when a read would not wait; errors for loss and withdrawal") {
  const EventsCursor c{5, 1};
  CHECK(events_revents(c, false, 1, 5) == 0);
  CHECK(events_revents(c, false, 1, 6) == (POLLIN | POLLRDNORM));
  CHECK(events_revents(c, false, 2, 5) == POLLERR);
  CHECK(events_revents(c, true, 1, 6) == (POLLERR | POLLHUP));
}

TEST_CASE("events write: 4 bytes, 0 masks, 1 unmasks, anything else is refused") {
  auto parse = [](std::uint32_t v) { return events_mask_parse(reinterpret_cast<const char*>(&v), sizeof v); };
  CHECK(parse(0) == true);
  CHECK(parse(1) == false);
  CHECK_FALSE(parse(2).has_value());
  const char byte = 0;
  CHECK_FALSE(events_mask_parse(&byte, 1).has_value());
}

TEST_CASE("interrupt counts: follow the attachment, hold while masked, deliver on unmask") {
  InterruptCounts counts(2);
  std::vector<std::uint64_t> now{3, 0};
  auto current = [&](std::uint16_t v) { return now[v]; };
  CHECK(counts.refresh(current));
  CHECK(counts.visible(0) == 3);
  CHECK_FALSE(counts.refresh(current));  // nothing new
  CHECK(counts.mask_set(0, true));
  now[0] = 5;
  now[1] = 1;
  CHECK(counts.refresh(current));  // vector 1 rose
  CHECK(counts.visible(0) == 3);   // held
  CHECK(counts.visible(1) == 1);
  CHECK(counts.mask_set(0, false));
  CHECK(counts.refresh(current));
  CHECK(counts.visible(0) == 5);  // what arrived while masked
  CHECK_FALSE(counts.mask_set(2, true));
  CHECK(counts.visible(2) == 0);
}

TEST_CASE("interrupt counts: cumulative across attachments, never lower") {
  InterruptCounts counts(1);
  std::uint64_t now = 4;
  auto current = [&](std::uint16_t) { return now; };
  CHECK(counts.refresh(current));
  counts.attachment_end(current);  // link lost with 4
  now = 0;                         // no attachment, then a new one from 0
  CHECK_FALSE(counts.refresh(current));
  CHECK(counts.visible(0) == 4);
  now = 2;
  CHECK(counts.refresh(current));
  CHECK(counts.visible(0) == 6);
}
