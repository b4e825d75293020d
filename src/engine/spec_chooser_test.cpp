// The speculative-steps chooser on synthetic hosts: cost tables and acceptance rates with a known
// best setting (it must settle on it), a host where speculation can never pay (it must stop
// trying), and acceptance that changes under it (it must notice, both ways).
#include "engine/spec_chooser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace mx {
namespace {

// A host: the cost of a target forward and of an MTP pass over r rows (seconds), the time
// outside forwards per emitted token, and the true acceptance of each draft position.
struct Host {
  std::function<double(double)> target, mtp;
  double overhead = 0;
  std::vector<double> accept;  // conditional, per position
  double noise = 0;            // relative sd of every observed time (a shared host's jitter)

  double AcceptLength(int s) const {
    double e = 1, prod = 1;
    for (int i = 0; i < s; ++i) e += (prod *= accept[i]);
    return e;
  }
  // The same formula the chooser's model states (spec_chooser.h), with the true rates.
  double Rate(int s, int64_t b) const {
    const double B = static_cast<double>(b), e = AcceptLength(s);
    double t = overhead * B * e;
    if (s == 0) return B / (target(B) + overhead * B);
    t += target(B * (s + 1)) + mtp(B * e) + (s - 1) * mtp(B);
    return B * e / t;
  }
  int Best(int max_steps, int64_t b, double* margin) const {
    int best = 0;
    for (int s = 1; s <= max_steps; ++s) best = Rate(s, b) > Rate(best, b) ? s : best;
    double second = 0;
    for (int s = 0; s <= max_steps; ++s) {
      if (s != best) second = std::max(second, Rate(s, b));
    }
    *margin = Rate(best, b) / second - 1;
    return best;
  }
};

// Runs `steps` decode steps of `batch` requests through the chooser, feeding it what the host
// would measure (acceptance drawn at random); returns the setting chosen at each step.
std::vector<int> Simulate(SpecChooser& c, const Host& h, int64_t batch, int steps,
                          std::mt19937& rng) {
  std::vector<int> chosen;
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> jitter(1.0, h.noise);
  auto observed = [&](double t) { return h.noise > 0 ? t * std::max(0.5, jitter(rng)) : t; };
  for (int k = 0; k < steps; ++k) {
    const int s = c.Choose(batch);
    chosen.push_back(s);
    const double B = static_cast<double>(batch);
    int64_t emitted = 0, accepted_rows = 0;
    for (int64_t r = 0; r < batch; ++r) {
      int acc = 0;
      while (acc < s && u(rng) < h.accept[acc]) ++acc;
      if (s > 0) c.ObserveVerify(s, acc);
      emitted += 1 + acc;
      accepted_rows += 1 + acc;
    }
    c.ObserveTarget(batch * (s + 1), observed(h.target(B * (s + 1))));
    if (s > 0) {
      c.ObserveMtp(accepted_rows, observed(h.mtp(static_cast<double>(accepted_rows))));
      for (int j = 1; j < s; ++j) c.ObserveMtp(batch, observed(h.mtp(B)));
    }
    c.ObserveOverhead(emitted, observed(h.overhead * static_cast<double>(emitted)));
  }
  return chosen;
}

double Share(const std::vector<int>& v, size_t from, int value) {
  size_t n = 0;
  for (size_t i = from; i < v.size(); ++i) n += v[i] == value ? 1 : 0;
  return static_cast<double>(n) / static_cast<double>(v.size() - from);
}

// Weight-bandwidth-bound: a forward costs a fixed read of the weights plus a little per row.
Host Bandwidth(std::vector<double> accept) {
  Host h;
  h.target = [](double r) { return 1e-3 * (1.0 + 0.06 * r); };
  h.mtp = [](double r) { return 1e-3 * (0.15 + 0.01 * r); };
  h.overhead = 2e-5;
  h.accept = std::move(accept);
  return h;
}

// Drafts that are never accepted, on the host where good ones would pay.
Host NeverAccepted() { return Bandwidth({0.0, 0.0, 0.0, 0.0, 0.0}); }

// Options whose re-probe interval stays at `steps` (no backoff).
SpecChooserOptions FixedInterval(int64_t steps) {
  SpecChooserOptions o;
  o.reprobe_interval = steps;
  o.max_reprobe_interval = steps;
  return o;
}

TEST(SpecChooser, SettlesOnTheKnownBestSetting) {
  struct Case {
    const char* name;
    Host host;
    int64_t batch;
  };
  std::vector<Case> cases = {
      // Cheap verify, the first four drafts mostly right: a chain of four.
      {"bandwidth_four_good_drafts", Bandwidth({0.95, 0.95, 0.9, 0.9, 0.2}), 1},
      // Cheap verify, two good drafts: two.
      {"bandwidth_two_good_drafts", Bandwidth({0.9, 0.8, 0.3, 0.1, 0.1}), 1},
      // Cheap verify, only the first draft is any good: one.
      {"bandwidth_first_draft_only", Bandwidth({0.8, 0.15, 0.1, 0.1, 0.1}), 1},
      // Cheap verify, drafts rarely right: off.
      {"bandwidth_poor_drafts", Bandwidth({0.1, 0.1, 0.1, 0.1, 0.1}), 1},
      // Verify rows cost as much as decode steps (a small compute-bound model): never speculate.
      {"compute_bound",
       Host{[](double r) { return 1e-4 * r; },
            [](double r) { return 0.4e-4 * r; },
            3e-5,
            {1.0, 0.9, 0.8, 0.7, 0.6}},
       1},
      // A batch of 8 on the bandwidth host with middling acceptance.
      {"bandwidth_batch8", Bandwidth({0.7, 0.6, 0.5, 0.4, 0.3}), 8},
  };
  for (const Case& k : cases) {
    SpecChooserOptions o;
    o.max_steps = 5;
    SpecChooser c(o);
    double margin = 0;
    const int want = k.host.Best(o.max_steps, k.batch, &margin);
    ASSERT_GT(margin, 0.05) << k.name << ": the table must have a clear optimum";
    std::mt19937 rng(17);
    const std::vector<int> got = Simulate(c, k.host, k.batch, 3000, rng);
    // After the first probes: the best setting nearly always (re-probes take the rest).
    EXPECT_GT(Share(got, 1000, want), 0.9) << k.name << " best " << want;
    EXPECT_EQ(c.last().probe ? want : c.last().steps, want) << k.name;
    // The prediction of the chosen setting is the host's true rate, within what a running
    // acceptance estimate can be off by.
    constexpr double kRateTolerance = 0.1;
    EXPECT_NEAR(c.Predict(want, k.batch) / k.host.Rate(want, k.batch), 1.0, kRateTolerance)
        << k.name;
  }
}

TEST(SpecChooser, StopsProbingWhereSpeculationCannotPay) {
  Host h{[](double r) { return 1e-4 * r; },
         [](double r) { return 0.4e-4 * r; },
         3e-5,
         {1.0, 1.0, 1.0, 1.0, 1.0}};
  SpecChooserOptions o;
  SpecChooser c(o);
  std::mt19937 rng(1);
  const std::vector<int> got = Simulate(c, h, 1, 5000, rng);
  int spec_steps = 0;
  for (int s : got) spec_steps += s > 0 ? 1 : 0;
  // One probe of each setting at most; then never again, even after many re-probe intervals.
  EXPECT_LE(spec_steps, o.max_steps * o.probe_steps);
  EXPECT_GT(spec_steps, 0);
  EXPECT_FALSE(c.CanPay(1));
  EXPECT_EQ(Share(got, 1000, 0), 1.0);
}

// Drafts that are never accepted on a host where verify is cheap: a draft could pay if accepted
// (CanPay), but the MTP layer is not worth keeping up (KeepMtp) while the failures are fresh;
// once they are stale (no verify for reprobe_interval steps) it is, so a re-probe can draft.
TEST(SpecChooser, KeepsTheMtpLayerOnlyWhileDraftsCouldPayAsMeasured) {
  SpecChooserOptions o;
  o.reprobe_interval = 100;
  SpecChooser c(o);
  EXPECT_TRUE(c.KeepMtp(1));  // nothing measured yet
  std::mt19937 rng(3);
  Simulate(c, NeverAccepted(), 1, 300, rng);
  EXPECT_TRUE(c.CanPay(1));
  EXPECT_FALSE(c.KeepMtp(1));
  for (int k = 0; k <= o.reprobe_interval; ++k) c.Choose(1);  // no verify observed
  EXPECT_TRUE(c.KeepMtp(1));
  SpecChooser good(o);
  Simulate(good, Bandwidth({0.9, 0.9, 0.8, 0.8, 0.5}), 1, 300, rng);
  EXPECT_TRUE(good.KeepMtp(1));
}

TEST(SpecChooser, NoticesAnAcceptanceShiftBothWays) {
  SpecChooserOptions o;
  o.reprobe_interval = 200;
  o.max_reprobe_interval = 400;  // the fruitless re-probes of phase 2 back off to this
  SpecChooser c(o);
  const Host good = Bandwidth({0.95, 0.95, 0.9, 0.9, 0.2});
  const Host bad = Bandwidth({0.02, 0.02, 0.02, 0.02, 0.02});
  double margin = 0;
  const int best_good = good.Best(o.max_steps, 1, &margin);
  ASSERT_GT(best_good, 0);
  ASSERT_EQ(bad.Best(o.max_steps, 1, &margin), 0);
  std::mt19937 rng(5);
  auto phase1 = Simulate(c, good, 1, 1500, rng);
  EXPECT_GT(Share(phase1, 1000, best_good), 0.9);
  // Drafts stop being accepted: observed at once while speculating, so off comes quickly.
  auto phase2 = Simulate(c, bad, 1, 1500, rng);
  size_t first_off = phase2.size();
  for (size_t i = 0; i < phase2.size(); ++i) {
    if (phase2[i] == 0 && Share(phase2, i, 0) > 0.9) {
      first_off = i;
      break;
    }
  }
  EXPECT_LT(first_off, 300u) << "still speculating long after acceptance fell";
  EXPECT_GT(Share(phase2, 500, 0), 0.9);
  // Drafts are good again: only a re-probe can see it (nothing is verified while off).
  auto phase3 = Simulate(c, good, 1, 1500, rng);
  size_t back = phase3.size();
  for (size_t i = 0; i < phase3.size(); ++i) {
    if (phase3[i] == best_good) {
      back = i;
      break;
    }
  }
  EXPECT_LE(back, static_cast<size_t>(o.max_reprobe_interval + 4 * o.probe_steps))
      << "the re-probe did not find the recovered acceptance";
  EXPECT_GT(Share(phase3, 700, best_good), 0.9);
  EXPECT_GT(c.accept(1), 0.7);
}

// Drafts that are never accepted, where they would pay if they were: every re-probe finds
// nothing, so the interval doubles up to its ceiling (5,000 steps at 100 doubling to 800: nine
// re-probes where a fixed interval makes fifty); a re-probe that finds acceptance back wins and
// returns it to the start.
TEST(SpecChooser, BacksOffReprobesThatKeepFindingNothing) {
  SpecChooserOptions o;
  o.reprobe_interval = 100;
  o.max_reprobe_interval = 800;
  SpecChooser c(o);
  const Host bad = NeverAccepted();
  const Host good = Bandwidth({0.95, 0.95, 0.9, 0.9, 0.2});
  double margin = 0;
  const int best_good = good.Best(o.max_steps, 1, &margin);
  ASSERT_GT(best_good, 0);
  std::mt19937 rng(13);
  int spec_steps = 0;
  for (int s : Simulate(c, bad, 1, 5000, rng)) spec_steps += s > 0 ? 1 : 0;
  EXPECT_EQ(c.reprobe_interval(), o.max_reprobe_interval);
  EXPECT_GE(spec_steps, 8 * o.probe_steps);   // it kept re-probing
  EXPECT_LE(spec_steps, 12 * o.probe_steps);  // at the backed-off interval
  int back = 0;
  while (back < 2000 && Simulate(c, good, 1, 1, rng)[0] != best_good) ++back;
  EXPECT_LE(back, o.max_reprobe_interval + 4 * o.probe_steps);
  EXPECT_EQ(c.reprobe_interval(), o.reprobe_interval);
  EXPECT_GT(Share(Simulate(c, good, 1, 1000, rng), 0, best_good), 0.9);
}

// The scheduler lets one request draft in a re-probe (it re-measures acceptance; the costs are
// known) and every request in a first probe (it measures the costs): the decision says which.
TEST(SpecChooser, TellsAReprobeFromAFirstProbe) {
  const SpecChooserOptions o = FixedInterval(50);
  SpecChooser c(o);
  const Host bad = NeverAccepted();
  std::mt19937 rng(19);
  int first = 0, again = 0;
  for (int k = 0; k < 500; ++k) {
    const int s = Simulate(c, bad, 4, 1, rng)[0];
    const SpecChooser::Decision& d = c.last();
    EXPECT_EQ(s > 0, d.probe);  // drafts never pay here: only probes draft
    EXPECT_TRUE(d.probe || !d.reprobe);
    if (d.probe) (d.reprobe ? again : first) += 1;
    if (k < o.probe_steps) EXPECT_FALSE(d.reprobe) << k;  // the first probe, after off's step
  }
  EXPECT_EQ(first, o.probe_steps);
  EXPECT_GE(again, 8 * o.probe_steps);
}

// Where one draft is best and off's only time was a cold one (capped by a larger row count's,
// so not trusted), off is probed again: it drafts nothing, so nothing is verified, and the
// probe must still end after probe_steps instead of waiting as a probe with drafts does.
TEST(SpecChooser, AProbeOfOffEndsAfterItsSteps) {
  double slow = 1;
  Host h = Bandwidth({0.9, 0.05, 0.05, 0.05, 0.05});
  h.target = [&slow](double r) { return slow * 1e-3 * (1.0 + 0.06 * r); };
  double margin = 0;
  ASSERT_EQ(h.Best(5, 1, &margin), 1);
  SpecChooserOptions o;
  SpecChooser c(o);
  std::mt19937 rng(23);
  slow = 80;
  Simulate(c, h, 1, 1, rng);  // off's cold first step
  slow = 1;
  const std::vector<int> got = Simulate(c, h, 1, 600, rng);
  int longest = 0, run = 0;
  for (int s : got) {
    run = s == 0 ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  EXPECT_GT(longest, 0) << "off was not probed again";
  EXPECT_LE(longest, o.probe_steps);
  EXPECT_GT(Share(got, 100, 1), 0.9);
}

// A re-probe where no running request can draft (their MTP layers fell behind while drafts were
// known to fail): the probe waits, keeping the MTP layer up, until drafts are verified, then
// runs its probe_steps and ends; without any verify it gives up after the interval.
TEST(SpecChooser, AProbeWaitsForARequestThatCanDraft) {
  const SpecChooserOptions o = FixedInterval(100);
  SpecChooser c(o);
  const Host bad = NeverAccepted();
  std::mt19937 rng(17);
  Simulate(c, bad, 1, 300, rng);
  ASSERT_FALSE(c.KeepMtp(1));
  // A decode step in which nobody drafts, whatever was chosen.
  auto undrafted = [&c] {
    const int s = c.Choose(1);
    c.ObserveTarget(1, 1e-3 * 1.06);
    c.ObserveOverhead(1, 2e-5);
    return s;
  };
  // Steps until the next re-probe starts, then the steps it lasts.
  auto reprobe = [&](int limit, int* waited) {
    int k = 0;
    while (k < 2 * o.reprobe_interval && undrafted() != 1) ++k;
    EXPECT_LT(k, 2 * o.reprobe_interval) << "no re-probe";
    *waited = 1;
    while (*waited < limit && undrafted() == 1) ++*waited;
  };
  int waited = 0;
  reprobe(60, &waited);
  EXPECT_EQ(waited, 60) << "stopped waiting";
  EXPECT_TRUE(c.KeepMtp(1));
  // A request that can draft arrives: probe_steps of verifies end the probe.
  const std::vector<int> probe = Simulate(c, bad, 1, o.probe_steps + 2, rng);
  EXPECT_EQ(probe.back(), 0);
  EXPECT_FALSE(c.KeepMtp(1));
  // Nobody can draft at the next re-probe either: it gives up after the interval.
  reprobe(4 * o.reprobe_interval, &waited);
  EXPECT_GT(waited, o.reprobe_interval);
  EXPECT_LE(waited, o.reprobe_interval + o.probe_steps + 1);
}

// What exploring costs in a run as short as a benchmark's: the expected tokens per second of the
// settings `auto` chose, step by step, against the best fixed setting over the same steps. On a
// compute-bound host (the bundled model's measured costs: a verify row costs 40% of a decode
// step, an MTP pass 40%; every time observed with 10% jitter, as on this shared host), `auto`
// must come within 3% of the best, whether that is off (English: drafts rarely right) or one
// draft (arithmetic: the first draft always right). Probing the longest chain first, as an
// optimistic rate alone would, cost 10% here.
TEST(SpecChooser, ShortRunsPayLittleForExploring) {
  auto host = [](std::vector<double> accept) {
    Host h;
    h.target = [](double r) { return 1e-3 * (0.08 + 0.05 * r); };
    h.mtp = [](double r) { return 1e-3 * (0.04 + 0.013 * r); };
    h.overhead = 5e-6;
    h.accept = std::move(accept);
    h.noise = 0.1;
    return h;
  };
  struct Case {
    const char* name;
    Host host;
    int steps;
  };
  for (const Case& k : {Case{"english", host({0.39, 0.35, 0.1, 0.05, 0.02}), 768},
                        Case{"arithmetic", host({0.999, 0.7, 0.3, 0.15, 0.1}), 1500}}) {
    SpecChooser c(SpecChooserOptions{});
    std::mt19937 rng(3);
    const std::vector<int> got = Simulate(c, k.host, 1, k.steps, rng);
    double tokens = 0, seconds = 0;
    for (int s : got) {
      tokens += k.host.AcceptLength(s);
      seconds += k.host.AcceptLength(s) / k.host.Rate(s, 1);
    }
    double margin = 0;
    const int best = k.host.Best(5, 1, &margin);
    constexpr double kShortRunShare = 0.97;  // the bar for `auto` against the best
    EXPECT_GT(tokens / seconds, kShortRunShare * k.host.Rate(best, 1))
        << k.name << ": best fixed setting " << best;
  }
}

// Times that are not the host's: the server's first decode step is a cold one (here 80x a
// warm step), and the host may preempt the engine for a while (here every forward 5x slower
// for 40 steps, all of them off). Neither may lock off out: with drafts rarely accepted on a
// compute-bound host, `auto` must run off nearly always once such a spell is over.
TEST(SpecChooser, ColdStepsAndSlowSpellsDoNotLockOffOut) {
  double slow = 1;  // the host's current slowdown
  Host h;
  h.target = [&slow](double r) { return slow * 1e-3 * (0.08 + 0.05 * r); };
  h.mtp = [&slow](double r) { return slow * 1e-3 * (0.04 + 0.013 * r); };
  h.overhead = 5e-6;
  h.accept = {0.39, 0.35, 0.1, 0.05, 0.02};
  double margin = 0;
  ASSERT_EQ(h.Best(5, 1, &margin), 0);
  SpecChooser c(SpecChooserOptions{});
  std::mt19937 rng(9);
  slow = 80;
  Simulate(c, h, 1, 1, rng);  // the cold first step (off: nothing was measured before it)
  slow = 1;
  std::vector<int> got = Simulate(c, h, 1, 1500, rng);
  EXPECT_GT(Share(got, 300, 0), 0.9) << "a cold first step kept off out";
  slow = 5;
  Simulate(c, h, 1, 40, rng);
  slow = 1;
  got = Simulate(c, h, 1, 1500, rng);
  EXPECT_GT(Share(got, 300, 0), 0.9) << "a slow spell kept off out";
}

// A server's batch changes all the time, and each new batch size has row counts never measured.
// Their costs are worth a probe only with the acceptance already known: on a host where good
// drafts would pay but these are known to be nearly always wrong, batch sizes 2..16 (50 steps
// each, after 500 steps alone) must cost no more than the periodic re-probes of one draft (one
// of probe_steps every reprobe_interval steps).
TEST(SpecChooser, NewBatchSizesAreNotProbedOnStaleHopes) {
  const Host h = Bandwidth({0.05, 0.05, 0.05, 0.05, 0.05});  // where good drafts would pay
  SpecChooserOptions o;
  SpecChooser c(o);
  std::mt19937 rng(11);
  Simulate(c, h, 1, 500, rng);
  int spec_steps = 0, steps = 0;
  for (int64_t b = 2; b <= 16; ++b) {
    for (int s : Simulate(c, h, b, 50, rng)) spec_steps += s > 0 ? 1 : 0;
    steps += 50;
  }
  EXPECT_LE(spec_steps, (steps / o.reprobe_interval + 1) * o.probe_steps);
}

TEST(SpecChooser, OffUntilADecodeStepWasMeasuredAndPredictionsNeedMeasuredCosts) {
  SpecChooser c(SpecChooserOptions{});
  EXPECT_EQ(c.Choose(4), 0);
  EXPECT_FALSE(c.last().probe);
  EXPECT_EQ(c.Predict(2, 4), 0.0);  // never measured: no guess
  EXPECT_TRUE(c.CanPay(4));
  c.ObserveTarget(4, 1e-3);
  c.ObserveOverhead(4, 4e-5);
  EXPECT_NEAR(c.Predict(0, 4), 4 / (1e-3 + 4e-5), 1e-6);
  // NaN and negative times are ignored, never averaged in.
  c.ObserveTarget(4, std::nan(""));
  c.ObserveTarget(4, -1);
  EXPECT_NEAR(c.Predict(0, 4), 4 / (1e-3 + 4e-5), 1e-6);
  EXPECT_GT(c.Choose(4), 0);  // now the optimistic long chain is worth a probe
  EXPECT_TRUE(c.last().probe);
}

}  // namespace
}  // namespace mx
