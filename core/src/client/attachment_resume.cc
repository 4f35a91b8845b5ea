// Attachment::State: resumption after a lost link (docs/reliability.md, "Resumption"), and
// bulk transfers that go on across one. Contract in client.hpp; the parts in
// attachment_state.hpp.
//
// A lost link (a send, receive or heartbeat that failed: ReplyRouter::link_lost) wakes the
// resume's thread. Callers meanwhile wait within their deadlines: nothing is received on the
// dead link, requests whose send failed are kept (ResendQueue) and wait for their answers,
// posted writes join the queue. The thread connects again, asks the exporter to go on with
// the attachment (resume_request: the last answer received), and over the new Session sends
// again, once and in order, what the exporter did not perform; the exporter first sends the
// answers this client did not receive. Until the lease runs out it retries; then, or when the
// exporter no longer holds the attachment (ENOENT) or is gone (connection refused), the
// attachment fails as before (EIO).
#include <chrono>
#include <string>
#include <thread>

#include "attachment_state.hpp"
#include "exporter_reply.hpp"
#include "rpcie/client_protocol.hpp"
#include "rpcie/log.hpp"

namespace rpcie::client {

namespace {

using namespace std::chrono_literals;

// One try at a resume: connect, resume_request, Session. Its deadline is the lease's end or
// this, whichever comes first, so that a link back in time gets several tries.
constexpr auto kTryTimeout = 2s;
// Between tries (the link is still down: connect fails at once).
constexpr auto kTryPause = 100ms;
// The resume thread's sleep while the link is up: each end of one is a wake-up per
// attachment, which an idle client pays for (docs/performance.md, "Scaling").
constexpr auto kIdleSlice = 30s;

}  // namespace

void Attachment::State::resumer_start() {
  router->resumer_set([this] {
    std::lock_guard g(resumer.lock());
    resume_wanted = true;
    resumer.cv().notify_all();
  });
  resumer.start("rpcie-resume", [this] { resume_run(); });
}

void Attachment::State::resume_run() {
  for (;;) {
    {
      std::unique_lock g(resumer.lock());
      // A lost link and stop() both notify under the lock: the slice only bounds the wait.
      while (!resumer.stopping() && !resume_wanted) resumer.cv().wait_for(g, kIdleSlice);
      if (resumer.stopping()) return;
      resume_wanted = false;
    }
    // Callers still sending or waiting on the old channel give up at once (their messages
    // are kept), rather than hold the send lock on it until their deadlines. Only this thread
    // replaces the Session, so it may read it unlocked.
    session->channel().abort();
    // The exporter keeps a lost attachment for a lease from when it saw the loss.
    const auto t0 = Deadline::Clock::now();
    const Deadline until = Deadline::after(lease);
    Result<void> r = fail(ETIMEDOUT, "the lease ran out before a try");
    while (!resumer.stopping() && !until.expired()) {
      r = resume_once(until.min(Deadline::after(kTryTimeout)));
      // ENOENT: the exporter holds the attachment no more. ECONNREFUSED: nothing listens,
      // so the exporter is gone (a live one always listens), and its attachments with it.
      if (r || r.error().code == ENOENT || r.error().code == ECONNREFUSED) break;
      std::unique_lock g(resumer.lock());
      resumer.cv().wait_for(g, kTryPause, [&] { return resumer.stopping(); });
    }
    if (resumer.stopping()) return;
    if (!r) {
      const auto loss = router->link_loss();
      (void)router->fail(Error{ErrorDomain::posix, EIO,
                               "link to the exporter lost (" + (loss ? loss->describe() : std::string("?")) +
                                   ") and not resumed: " + r.error().describe()});
      return;
    }
    router->resumed();
    RPCIE_LOG_INFO("client", "attachment {} to {} resumed after {} ms", id, device.name,
                   std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::Clock::now() - t0).count());
  }
}

Result<void> Attachment::State::resume_once(Deadline deadline) {
  std::uint64_t answered = 0;
  {
    // Read while nobody receives: nothing taken from the old link after this read is then
    // answered again (receivers stop at the role once resuming).
    auto role = dispatcher->receive_role_hold();
    answered = router->answered();
  }
  RPCIE_TRY_ASSIGN(auto sock, exporter_connect(host, port, options, deadline));
  RPCIE_TRY(sock.message_send(proto::ResumeRequest{id, answered}, 1, deadline));
  const std::string what = "resume attachment " + std::to_string(id) + " to " + device.name;
  RPCIE_TRY_ASSIGN(auto m, reply_recv(sock, deadline, what));
  RPCIE_TRY_ASSIGN(const auto* reply, reply_as<proto::ResumeReply>(m, "resume"));
  const std::uint64_t performed = reply->performed;
  RPCIE_TRY_ASSIGN(auto next, session_make(std::move(sock), what, deadline));
  RPCIE_TRY_ASSIGN(const auto parts, session_parts(*next, what));
  // The swap: no transfer (link_lock), send (send_lock), receive (the role) or heartbeat
  // (socket_set) uses the old Session meanwhile. In the order the users take them.
  std::unique_lock link(link_lock, std::defer_lock);
  if (!link.try_lock_until(deadline.when())) return fail(ETIMEDOUT, what + ": a transfer still holds the link");
  std::unique_lock sl(send_lock, std::defer_lock);
  if (!sl.try_lock_until(deadline.when())) return fail(ETIMEDOUT, what + ": a send still holds the link");
  auto role = dispatcher->receive_role_hold();
  auto old = std::move(session);  // closed on return, once nothing points into it
  session_set(std::move(next), parts);
  inbox->channel_set(session->channel());
  lease_keeper->socket_set(session->bootstrap());  // waits for a heartbeat on the old one
  // The exporter's unseen answers come first on the new channel; what it did not perform
  // follows them, in the order it was first sent.
  resend.performed_through(performed);
  for (const auto& k : resend.after(performed)) RPCIE_TRY(session->channel().bytes_send(k.bytes, deadline));
  return {};
}

Result<void> Attachment::State::bulk_run(const std::function<Result<void>()>& attempt, Deadline deadline) {
  for (;;) {
    Result<void> r;
    {
      std::shared_lock link(link_lock);
      r = attempt();
      if (r) return r;
      // Only a lost link is retried: the channel says so (a device's error leaves it up).
      if (!session->channel().failure() && !router->resuming()) return r;
    }
    link_fail(r.error());
    RPCIE_TRY(dispatcher->await([&] { return !router->resuming(); }, deadline));
  }
}

}  // namespace rpcie::client
