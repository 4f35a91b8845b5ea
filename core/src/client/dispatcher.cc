#include "dispatcher.hpp"

#include <sys/prctl.h>

#include <algorithm>

#include "rpcie/log.hpp"
#include "rpcie/thread_sched.hpp"

namespace rpcie::client {

namespace {
Error link_lost(const Error& e) { return Error{ErrorDomain::posix, EIO, "link to the exporter lost: " + e.describe()}; }
}  // namespace

Dispatcher::Dispatcher(Inbox& inbox, ReplyRouter& router, Batch batch, std::chrono::microseconds quiet)
    : inbox_(inbox), router_(router), batch_(std::move(batch)), quiet_(quiet) {}

Dispatcher::~Dispatcher() { stop(); }

void Dispatcher::start() {
  worker_.start("rpcie-dispatch", [this] { run(); });
}

void Dispatcher::stop() {
  worker_.stop([this] {
    if (on_fd_.load()) inbox_.wake();
  });
}

Dispatcher::Call::Call(Dispatcher& d, bool posted) : d_(d), posted_(posted) {
  d_.busy_.fetch_add(1);  // seq_cst, before on_fd_ is read: pairs with run()'s fence
  if (!posted_) d_.last_call_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  // A dispatcher asleep on the CQ wait fd would wake for every completion of this call (and
  // take this thread's CPU each time): move it to its condition variable now. Not for a
  // posted call: it completes nothing the dispatcher would wake for, and a woken dispatcher
  // spins (the wake-up counts as activity) on the CPU the caller needs.
  if (!posted_ && d_.on_fd_.load()) d_.inbox_.wake();
}

Dispatcher::Call::~Call() {
  if (!posted_) d_.last_call_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  // Only a posted call after a quiet spell wakes a parked dispatcher: waking it at the end of
  // every call would cost a context switch per MMIO read. Not while a batch waits: the
  // dispatcher wakes for it anyway, and the check of the quiet spell reads the clock, which
  // in a stream of writes would cost a third of each.
  // Nor when the dispatcher wakes within kBatchDelay anyway (it waits for a batch that this
  // call's writer sent itself): in a stream of writes that would be a wake-up per batch.
  // A watched attachment wants its interrupts received as soon as the calls end: every
  // call's end wakes it.
  if (d_.busy_.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
      (posted_ || d_.watchers_.load(std::memory_order_relaxed) > 0) && d_.parked_.load(std::memory_order_acquire) &&
      !d_.batch_.pending()) {
    const auto now = Clock::now();
    const auto until = d_.parked_until_.load(std::memory_order_relaxed);
    if (d_.app_active(now) || (until != 0 && Clock::time_point(Clock::duration(until)) - now <= kSoon)) return;
    std::lock_guard g(d_.worker_.lock());  // the dispatcher checks its predicate under it: no lost wake-up
    d_.worker_.cv().notify_one();
  }
}

void Dispatcher::batch_waiting(Clock::time_point due) {
  // Pairs with the fence in run(): either the dispatcher's predicate sees the batch pending,
  // or this sees when its wait ends (or 0: it is not parked, and is woken).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const auto until = parked_until_.load(std::memory_order_relaxed);
  if (until != 0 && until <= due.time_since_epoch().count()) return;
  {
    std::lock_guard g(worker_.lock());  // no lost wake-up between its predicate and its sleep
    worker_.cv().notify_one();
  }
  if (on_fd_.load(std::memory_order_relaxed)) inbox_.wake();
}

Dispatcher::Clock::time_point Dispatcher::last_wait() const noexcept {
  return Clock::time_point{Clock::duration(last_call_.load(std::memory_order_relaxed))};
}

void Dispatcher::watch(bool on) {
  if (!on) {
    watchers_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  if (watchers_.fetch_add(1, std::memory_order_relaxed) > 0) return;
  // A dispatcher parked for a quiet spell ends it now.
  std::lock_guard g(worker_.lock());
  worker_.cv().notify_one();
}

std::unique_lock<std::mutex> Dispatcher::receive_role_hold() { return std::unique_lock(receiver_); }

bool Dispatcher::receive_slice(Deadline deadline) {
  {
    std::unique_lock role(receiver_, std::try_to_lock);
    if (!role.owns_lock()) return false;
    // Nothing more is taken from a lost link: a resume asks for what it had not delivered.
    if (router_.resuming()) return false;
    // Short slices, so that a failure noticed elsewhere (heartbeat) ends the wait.
    auto m = inbox_.message_recv(deadline.min(Deadline::after(std::chrono::milliseconds(50))));
    if (m) {
      router_.message_file(**m);
    } else if (m.error().code != EPROTO && m.error().code != ETIMEDOUT) {  // EPROTO: one dropped
      router_.link_lost(link_lost(m.error()));
    }
  }
  router_.sleepers_wake();  // another caller that found the role taken may take it now
  return true;
}

bool Dispatcher::app_active(Clock::time_point now) const {
  if (busy_.load(std::memory_order_relaxed) > 0) return true;
  if (watchers_.load(std::memory_order_relaxed) > 0) return false;
  return now - last_wait() < quiet_;
}

void Dispatcher::run() {
  ::prctl(PR_SET_TIMERSLACK, 1000UL);  // wake within ~1 us of a batch's due time, not 50 us
  // Never preempt the application this thread helps (rpcie/thread_sched.hpp).
  if (auto r = thread_background(); !r)
    RPCIE_LOG_DEBUG("client", "dispatcher stays a normal thread: {}", r.error().describe());
  while (!worker_.stopping()) {
    if (router_.resuming() || router_.failure()) {
      // Nothing to receive on a dead link: the resume (or the owner's stop) is waited for.
      std::unique_lock g(worker_.lock());
      worker_.cv().wait_for(g, std::chrono::milliseconds(20), [&] { return worker_.stopping(); });
      continue;
    }
    std::optional<Clock::time_point> batch_due;
    if (batch_.pending()) batch_due = batch_.send_due();
    if (app_active(Clock::now()) || batch_due) {
      std::unique_lock g(worker_.lock());
      const auto until = std::min(batch_due.value_or(Clock::time_point::max()), Clock::now() + quiet_);
      parked_until_.store(until.time_since_epoch().count(), std::memory_order_relaxed);
      parked_.store(true, std::memory_order_release);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      worker_.cv().wait_until(g, until, [&] {
        return worker_.stopping() || (!batch_due && batch_.pending()) || (!batch_due && !app_active(Clock::now()));
      });
      parked_.store(false, std::memory_order_relaxed);
      parked_until_.store(0, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);  // a writer that saw `until` finds us awake
      continue;
    }
    // Asleep on the fd until a message, or a wake-up: a call that waits (Call), a batch
    // (batch_waiting), stop(), a lost link (the resume aborts the channel). Each sets what
    // the cancel below reads before it looks at on_fd_ (the fences pair up), and the channel
    // looks at the cancel again after its trywait: an idle attachment sleeps a whole slice.
    on_fd_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    auto ready =
        app_active(Clock::now()) ? Result<bool>(false) : inbox_.message_wait(Deadline::after(kIdleSlice), [this] {
          return busy_.load(std::memory_order_relaxed) > 0 || batch_.pending() || worker_.stopping();
        });
    on_fd_.store(false, std::memory_order_relaxed);
    if (!ready) {
      router_.link_lost(link_lost(ready.error()));
      continue;
    }
    // Woken late (a call began and ended while this thread was off the CPU), it keeps that
    // call's quiet spell all the same: the next pass parks.
    if (*ready && !app_active(Clock::now())) drain();
  }
}

void Dispatcher::drain() {
  {
    std::unique_lock role(receiver_, std::try_to_lock);
    if (!role.owns_lock() || router_.resuming()) return;
    for (int i = 0; i < 64 && busy_.load(std::memory_order_relaxed) == 0; ++i) {
      auto m = inbox_.message_recv(Deadline::after(std::chrono::microseconds(0)));
      if (!m) break;
      router_.message_file(**m);
    }
  }
  router_.sleepers_wake();  // a caller that found the role taken may take it now
}

}  // namespace rpcie::client
