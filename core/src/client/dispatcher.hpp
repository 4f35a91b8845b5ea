// Dispatcher: who receives on an attachment's channel, and when.
//
// Two kinds of thread receive. A caller that waits for its reply receives itself (await():
// it takes the receive role when free, so there is no hand-off on the latency path), and
// files whatever arrives for others in the ReplyRouter. The dispatcher's own thread
// progresses the fabric, counts interrupts and sends posted writes whose batch is due while
// nobody else is on the channel. It stands aside while API calls are in progress or were made
// within `quiet`: two threads spinning on one CQ would only take turns on its lock and, with
// two cores, on the CPU. Calls mark themselves with Dispatcher::Call (RAII). While someone
// waits for interrupts outside the API (watch()), it stands aside only during calls.
// Its thread ("rpcie-dispatch") is SCHED_BATCH (rpcie/thread_sched.hpp): woken, it runs on an
// idle CPU, or once the application thread it shares a CPU with blocks; it never preempts
// that thread (a writer preempted mid-burst could lose its CPU to another process for a
// whole time slice). A batch due while its writer computes on the only CPU the process may
// use leaves at the writer's next call, or when the writer's time slice ends.
//
// Thread-safety: await(), Call and batch_waiting() from any thread; start()/stop() from the
// owner only. stop() joins the thread; the destructor stops.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>

#include "reply_router.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/result.hpp"
#include "worker.hpp"

namespace rpcie::client {

// The channel as the dispatcher uses it (an interface, so that tests can feed messages).
class Inbox {
 public:
  virtual ~Inbox() = default;
  // The next message (valid until the next call), EPROTO for one that was dropped as
  // malformed, ETIMEDOUT at the deadline, anything else: the link is gone.
  virtual Result<const proto::Decoded*> message_recv(Deadline deadline) = 0;
  // Background wait for a message (true), the deadline or `cancel` (false); spins briefly.
  virtual Result<bool> message_wait(Deadline deadline, const std::function<bool()>& cancel) = 0;
  // Ends a message_wait() asleep on the CQ wait fd now.
  virtual void wake() noexcept = 0;
};

class Dispatcher {
 public:
  using Clock = Deadline::Clock;
  // `batch_send_due`: sends the posted-write batch if it is due and returns when the rest
  // is due (nullopt: nothing waits). `batch_pending`: lock-free "a batch waits".
  struct Batch {
    std::function<std::optional<Clock::time_point>()> send_due;
    std::function<bool()> pending;
  };
  Dispatcher(Inbox& inbox, ReplyRouter& router, Batch batch, std::chrono::microseconds quiet);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  void start();
  void stop();

  // An API call in progress. A posted call (mmio_write) receives nothing, so it does not
  // start the quiet period: once it returns, the dispatcher is back on duty at once (an
  // application that rings a doorbell and then sleeps in poll() on its events file relies
  // on the dispatcher to receive the interrupt).
  class Call {
   public:
    explicit Call(Dispatcher& d, bool posted = false);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    Dispatcher& d_;
    bool posted_;
  };

  // Receives until `ready()` holds (it must lock what it reads itself), the attachment
  // fails (its error) or the deadline passes (ETIMEDOUT).
  template <class Ready>
  Result<void> await(Ready&& ready, Deadline deadline) {
    for (;;) {
      // Read before looking: a reply filed, or the receive role freed, after this read ends
      // the sleep below at once (without it, a wake-up between the look and the sleep was
      // lost, and the reply waited the whole 5 ms slice).
      const auto seen = router_.changes();
      if (ready()) return {};
      if (auto f = router_.failure()) return tl::unexpected(*f);
      if (deadline.expired()) return fail(ETIMEDOUT, "deadline passed waiting for the exporter");
      // While the link is being resumed there is nothing to receive: sleep until it is back.
      if (router_.resuming() || !receive_slice(deadline))
        router_.sleep(std::min(deadline.when(), Clock::now() + std::chrono::milliseconds(5)), seen);
    }
  }

  // A batch started waiting for the dispatcher to send it by `due`: wake the dispatcher,
  // whether it is parked or asleep on the CQ wait fd, unless it is parked until `due` or
  // earlier already (in a stream of writes: it comes for the previous batch, finds this one,
  // and waits for it; waking it for each batch preempts a writer that shares its CPU).
  void batch_waiting(Clock::time_point due);
  // The receive role, held until the lock goes: nobody receives meanwhile (a resume swaps
  // the channel under it).
  std::unique_lock<std::mutex> receive_role_hold();
  // When the last call that waited (not a posted one) started or ended.
  Clock::time_point last_wait() const noexcept;
  // Someone waits for interrupts outside the API (Attachment::interrupt_watch): no quiet
  // spell after calls while any watch is on. Counted.
  void watch(bool on);

 private:
  // One short receive if the role is free (true), else false at once.
  bool receive_slice(Deadline deadline);
  bool app_active(Clock::time_point now) const;
  // A parked dispatcher that wakes within this needs no wake-up from a posted call's end.
  static constexpr Clock::duration kSoon = std::chrono::microseconds(20);
  // An idle dispatcher's sleep on the CQ wait fd; what ends it early is signalled.
  static constexpr auto kIdleSlice = std::chrono::seconds(1);
  void run();
  // Drains what has arrived without waiting, while no call is in progress.
  void drain();

  Inbox& inbox_;
  ReplyRouter& router_;
  Batch batch_;
  const std::chrono::microseconds quiet_;

  std::mutex receiver_;  // the receive role
  std::atomic<int> busy_{0};
  std::atomic<int> watchers_{0};
  std::atomic<Clock::rep> last_call_{0};
  std::atomic<bool> on_fd_{false};   // inside message_wait()
  std::atomic<bool> parked_{false};  // waits for the application to go quiet
  // While parked: when its wait ends (steady_clock ticks); 0 otherwise.
  std::atomic<Clock::rep> parked_until_{0};
  Worker worker_;  // declared last: stopped (joined) before the members above go
};

}  // namespace rpcie::client
