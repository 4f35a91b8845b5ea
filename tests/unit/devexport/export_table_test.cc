// ExportTable: which client may claim which export (allow lists, exclusive and shared
// exports), release, the entries of list and attach replies, and reload (exports added,
// removed at once or once free, replaced, changes of held ones refused).
#include "export_table.hpp"

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

using namespace rpcie;
using namespace rpcie::dev;

namespace {

ExportConfig export_config(const std::string& name, bool shared = false, std::vector<std::string> allow = {},
                           DmaMode dma = DmaMode::on_demand) {
  ExportConfig c;
  c.spec.name = name;
  c.spec.backend = "membar";
  c.spec.params["size"] = "1M";
  c.shared = shared;
  c.allow = std::move(allow);
  c.dma = dma;
  return c;
}

void export_add(ExportTable& t, ExportConfig c) {
  auto b = backend_create(c.spec);
  REQUIRE_MESSAGE(b, (b ? "" : b.error().message));
  t.add(std::move(c), std::move(*b));
}

Deadline soon() { return Deadline::after(std::chrono::seconds(1)); }

ExportSlot& slot_of(ExportTable& t, const std::string& name) {
  ExportSlot* s = t.find(name).get();  // the table keeps it alive
  REQUIRE(s != nullptr);
  return *s;
}

// What a reload to `configs` wants: a backend for each (the exporter makes one only for what
// is new or changed; a backend the table does not take is simply dropped).
std::vector<ExportTable::Wanted> wanted(const std::vector<ExportConfig>& configs) {
  std::vector<ExportTable::Wanted> out;
  for (const auto& c : configs) {
    auto b = backend_create(c.spec);
    REQUIRE(b);
    out.push_back({c, std::move(*b)});
  }
  return out;
}

std::vector<std::string> names_listed(ExportTable& t) {
  ExportTable::ListStorage storage;
  std::vector<std::string> out;
  for (const auto& e : t.list(storage).exports) out.emplace_back(e.name);
  return out;
}

}  // namespace

TEST_CASE("find returns the export of that name, or null") {
  ExportTable t;
  export_add(t, export_config("a"));
  export_add(t, export_config("b"));
  CHECK(t.counts().exports == 2);
  CHECK(t.find("a").get() == &slot_of(t, "a"));
  CHECK(t.find("b")->config.spec.name == "b");
  CHECK(t.find("c") == nullptr);
  CHECK(t.find("") == nullptr);
}

TEST_CASE("an exclusive export takes one holder; another client gets EBUSY naming the holder") {
  ExportTable t;
  export_add(t, export_config("a"));
  ExportSlot& a = slot_of(t, "a");
  auto first = t.claim(a, "alice", soon());
  REQUIRE(first);
  CHECK(*first);
  auto second = t.claim(a, "bob", soon());
  REQUIRE_FALSE(second);
  CHECK(second.error().code == EBUSY);
  CHECK(second.error().message == "busy: attached by alice");
  CHECK(a.holders == std::vector<std::string>{"alice"});
}

TEST_CASE("after release and the reset the export is free and the next claim is first again") {
  ExportTable t;
  export_add(t, export_config("a"));
  ExportSlot& a = slot_of(t, "a");
  REQUIRE(t.claim(a, "alice", soon()));
  CHECK(t.release(a, "alice"));
  t.reset_done(a);
  auto again = t.claim(a, "bob", soon());
  REQUIRE(again);
  CHECK(*again);
}

TEST_CASE("a claim waits for the last holder's reset, and gives up with EBUSY at its deadline") {
  ExportTable t;
  export_add(t, export_config("a"));
  ExportSlot& a = slot_of(t, "a");
  REQUIRE(t.claim(a, "alice", soon()));
  REQUIRE(t.release(a, "alice"));  // the teardown (device reset) is under way
  const auto t0 = std::chrono::steady_clock::now();
  auto early = t.claim(a, "alice", Deadline::after(std::chrono::milliseconds(50)));
  REQUIRE_FALSE(early);
  CHECK(early.error().code == EBUSY);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(50));
  CHECK(a.holders.empty());
  std::atomic<bool> reset{false};
  std::thread teardown([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    reset.store(true);
    t.reset_done(a);
  });
  auto after = t.claim(a, "alice", Deadline::after(std::chrono::seconds(5)));
  CHECK(reset.load());  // it returned only once the reset was done
  teardown.join();
  REQUIRE(after);
  CHECK(*after);
}

TEST_CASE("a shared export takes several holders; only the first attaches, only the last detaches") {
  ExportTable t;
  export_add(t, export_config("s", true));
  ExportSlot& s = slot_of(t, "s");
  auto alice = t.claim(s, "alice", soon());
  auto bob = t.claim(s, "bob", soon());
  auto alice2 = t.claim(s, "alice", soon());
  REQUIRE(alice);
  REQUIRE(bob);
  REQUIRE(alice2);
  CHECK(*alice);
  CHECK_FALSE(*bob);
  CHECK_FALSE(*alice2);
  CHECK_FALSE(t.release(s, "alice"));
  CHECK_FALSE(t.release(s, "bob"));
  CHECK(t.release(s, "alice"));
}

TEST_CASE("an allow list refuses other clients with EACCES and holds nothing for them") {
  ExportTable t;
  export_add(t, export_config("a", false, {"alice", "carol"}));
  ExportSlot& a = slot_of(t, "a");
  auto bob = t.claim(a, "bob", soon());
  REQUIRE_FALSE(bob);
  CHECK(bob.error().code == EACCES);
  CHECK(bob.error().message == "client 'bob' is not allowed to attach 'a'");
  CHECK(a.holders.empty());
  CHECK(t.claim(a, "carol", soon()));
}

TEST_CASE("releasing a client that holds nothing changes nothing") {
  ExportTable t;
  export_add(t, export_config("a"));
  ExportSlot& a = slot_of(t, "a");
  REQUIRE(t.claim(a, "alice", soon()));
  CHECK_FALSE(t.release(a, "bob"));
  CHECK(a.holders == std::vector<std::string>{"alice"});
}

TEST_CASE("list gives every export with its state, holders and flags") {
  ExportTable t;
  export_add(t, export_config("a"));
  export_add(t, export_config("s", true, {}, DmaMode::mirror));
  REQUIRE(t.claim(slot_of(t, "s"), "alice", soon()));
  REQUIRE(t.claim(slot_of(t, "s"), "bob", soon()));
  ExportTable::ListStorage storage;
  const proto::ListReply l = t.list(storage);
  REQUIRE(l.exports.size() == 2);
  CHECK(l.exports[0].name == "a");
  CHECK(l.exports[0].backend == "membar");
  CHECK(l.exports[0].state == proto::ExportState::free);
  CHECK(l.exports[0].holder.empty());
  CHECK(l.exports[0].flags == 0);
  CHECK(l.exports[1].name == "s");
  CHECK(l.exports[1].state == proto::ExportState::attached);
  CHECK(l.exports[1].holder == "alice,bob");
  CHECK(l.exports[1].flags == (proto::kExportShared | proto::kExportMirror));
  // membar's BAR 0 is plain writable memory: offered direct.
  REQUIRE(l.exports[0].bars.size() == 1);
  CHECK(l.exports[0].bars[0].bar == 0);
  CHECK(l.exports[0].bars[0].size == (1u << 20));
  CHECK(l.exports[0].bars[0].kind == pci::BarKind::memory);
  CHECK((l.exports[0].bars[0].flags & proto::kBarFlagDirect) != 0);
}

TEST_CASE("an export's data-path policy is in its entry's flags: sealed only, open only, or neither") {
  ExportTable t;
  const std::pair<const char*, std::optional<DataPathChoice>> policies[] = {{"unset", std::nullopt},
                                                                            {"auto", DataPathChoice::automatic},
                                                                            {"sealed", DataPathChoice::sealed},
                                                                            {"open", DataPathChoice::open}};
  for (const auto& [name, policy] : policies) {
    ExportConfig c = export_config(name, true);
    c.data_path = policy;
    export_add(t, c);
  }
  ExportTable::ListStorage storage;
  const proto::ListReply l = t.list(storage);
  REQUIRE(l.exports.size() == 4);
  CHECK(l.exports[0].flags == proto::kExportShared);
  CHECK(l.exports[1].flags == proto::kExportShared);
  CHECK(l.exports[2].flags == (proto::kExportShared | proto::kExportSealedOnly));
  CHECK(l.exports[3].flags == (proto::kExportShared | proto::kExportOpenOnly));
  // The entry of an attach reply says the same.
  std::string holder;
  CHECK(t.entry(slot_of(t, "sealed"), holder).flags == (proto::kExportShared | proto::kExportSealedOnly));
  // What goes on the wire is valid (never both bits).
  for (const auto& e : l.exports) CHECK(proto::ExportEntry::valid(e));
}

TEST_CASE("entry describes one export with its current holders") {
  ExportTable t;
  export_add(t, export_config("a"));
  ExportSlot& a = slot_of(t, "a");
  REQUIRE(t.claim(a, "alice", soon()));
  std::string holder;
  const proto::ExportEntry e = t.entry(a, holder);
  CHECK(e.name == "a");
  CHECK(e.holder == "alice");
  CHECK(e.state == proto::ExportState::attached);
}

TEST_CASE("reload adds new exports and removes free ones at once") {
  ExportTable t;
  export_add(t, export_config("a"));
  export_add(t, export_config("b"));
  const auto o = t.reload(wanted({export_config("b"), export_config("c")}));
  CHECK(o.added == std::vector<std::string>{"c"});
  CHECK(o.removed == std::vector<std::string>{"a"});
  CHECK(o.retiring.empty());
  CHECK(o.replaced.empty());
  CHECK(names_listed(t) == std::vector<std::string>{"b", "c"});
  CHECK(t.find("a") == nullptr);
}

TEST_CASE("a removed export that is held stays listed, refuses new claims, and goes after its reset") {
  ExportTable t;
  export_add(t, export_config("a", true));
  auto a = t.find("a");  // as an attach holds it
  REQUIRE(t.claim(*a, "alice", soon()));
  const auto o = t.reload(wanted({export_config("b")}));
  CHECK(o.retiring == std::vector<std::string>{"a"});
  CHECK(names_listed(t) == std::vector<std::string>{"a", "b"});
  CHECK(t.counts().attached == 1);
  auto bob = t.claim(*a, "bob", soon());
  REQUIRE_FALSE(bob);
  CHECK(bob.error().code == ENOENT);
  CHECK(bob.error().message == "export 'a' was removed from the configuration");
  REQUIRE(t.release(*a, "alice"));
  CHECK(names_listed(t) == std::vector<std::string>{"a", "b"});  // until the reset is done
  t.reset_done(*a);
  CHECK(names_listed(t) == std::vector<std::string>{"b"});
  CHECK(a->config.spec.name == "a");  // the attach's reference still works
}

TEST_CASE("an export configured again while it waits for its holder stays") {
  ExportTable t;
  export_add(t, export_config("a"));
  ExportSlot& a = slot_of(t, "a");
  REQUIRE(t.claim(a, "alice", soon()));
  (void)t.reload(wanted({}));
  const auto o = t.reload(wanted({export_config("a")}));
  CHECK(o.added.empty());
  REQUIRE(t.release(a, "alice"));
  t.reset_done(a);
  CHECK(names_listed(t) == std::vector<std::string>{"a"});
  CHECK(t.claim(a, "bob", soon()));
}

TEST_CASE("a changed export is replaced when free, and kept as it runs when held") {
  ExportTable t;
  export_add(t, export_config("free"));
  export_add(t, export_config("held"));
  ExportSlot* held = &slot_of(t, "held");
  ExportSlot* old_free = &slot_of(t, "free");
  REQUIRE(t.claim(*held, "alice", soon()));
  const auto o = t.reload(wanted({export_config("free", true), export_config("held", true)}));
  CHECK(o.replaced == std::vector<std::string>{"free"});
  CHECK(o.refused == std::vector<std::string>{"held"});
  CHECK(t.find("free").get() != old_free);
  CHECK(t.find("free")->config.shared);
  CHECK(t.find("held").get() == held);
  CHECK_FALSE(held->config.shared);
}

TEST_CASE("an unchanged export keeps its slot and its holders across a reload") {
  ExportTable t;
  export_add(t, export_config("a"));
  ExportSlot* a = &slot_of(t, "a");
  REQUIRE(t.claim(*a, "alice", soon()));
  ExportConfig moved = export_config("a");
  moved.origin = "exportd.toml:12";  // only the line it is on changed
  const auto o = t.reload(wanted({moved}));
  CHECK(o.added.empty());
  CHECK(o.replaced.empty());
  CHECK(o.refused.empty());
  CHECK(t.find("a").get() == a);
  CHECK(a->holders == std::vector<std::string>{"alice"});
}
