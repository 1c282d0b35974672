// Package usage throttles on usage recorded in the windows: rules that read window.Store
// and deny while an aggregate exceeds a bound, such as
//
//	rules:
//	  - {name: tenant-quota, metric: cost, agg: sum, window: 1h, max: 1000}
//	  - {name: shed-slow, metric: latency_ms, agg: p95, window: 5m, max: 800, key: "*"}
//
// "deny a tenant once the sum of its cost over the last hour exceeds 1000" and "shed every
// request while the p95 latency of all series over 5 minutes exceeds 800 ms".
//
// Rules live in the policy file next to the limiter's policies; ParseRules reads its
// "rules" list. Each rule becomes a Checker, which implements limiter.Checker: pass
// NewCheckers' result as limiter.Config.Checkers and a request names a rule like a policy
// (POST /v1/allow {"policies": ["per-tenant", "tenant-quota"], "key": "tenant-42"}), so
// rate policies and usage rules are decided together and a denial names whichever denied.
//
// # Semantics
//
// A rule denies while its aggregate (count, sum, avg, min, max, rate per second, or a
// quantile pNN) over Window of the selected series is strictly greater than Max. The window
// is read at the decision's now like any window query: the current slot and the
// Window/slot − 1 before it. Usage is what ingest recorded; the request's cost is not
// added, so a key can overshoot a quota by the usage still in flight. An unknown series is
// allowed: no usage.
//
// A rule with match: (Rule.Match, issue #27) reads the series selected by labels as well:
//
//	rules:
//	  - {name: pay-quota, metric: cost, agg: sum, window: 1h, max: 1000, match: 'route="/pay"'}
//
// sums each tenant's cost events labelled route="/pay" and nothing else of the tenant's. The
// matchers are PromQL's, as the query API's match= takes them, read by Prometheus' parser
// (ParseMatch) when the file is loaded, so a bad one is refused with the rule's line. The
// key is then compared with the series' key label: an exact key selects that key's series,
// labelled or not, whose labels match; a glob, every key it matches. Without match: a rule
// reads what it read before labels.
//
// RetryAfter is derived from the window, assuming no new events: for count, sum and max it
// is exactly the time until enough of the oldest slots leave for the rest to be within Max;
// for avg, min and quantiles, which can move either way as slots leave, it is the time
// until the oldest slot holding data leaves, the first instant the value can change (the
// client may be told to wait again then). See Checker.Check for rate and negative sums.
//
// The window's metric must have rings long enough for the rule: a 1 h quota on cost needs
// cost slots whose retention is at least 1 h, a 7d one tiers that reach 7 days
// (StoreConfig.Metrics, slide serve's per-metric rings, window.RingConfig.Tiers); NewChecker
// refuses a window the rings cannot answer, naming rings that would (RingConfig.Serving:
// "--rings cost=1m:60+1h:48+1d:29" for 30d on cost=1m:60, with the store's other per-metric
// rings kept in the value, so that pasting it refuses no other rule). A window past the ring's own
// slots reads the tiers, its start rounded down to the tier slot holding it; its RetryAfter
// comes from reads of the newest j slots, which round out too, so it errs late, never early.
//
// # Calendar windows
//
// window: calendar_day, calendar_week or calendar_month (Rule.Calendar), with timezone: an
// IANA zone (default UTC; "Local" and unknown names are refused), reads from the zone's last
// boundary (local midnight, Monday 00:00, the 1st at 00:00) to now, with the zone's DST rules:
// a day is 23 or 25 hours around a change. The decision's Window is the period's length,
// ResetAfter the time to the next boundary, and a denial's RetryAfter that exactly: the whole
// window resets then. The read takes whole slots: a boundary inside a slot starts the read at
// that slot's start. With cost's default rings (1m:60+1h:48+1d:36), a day's start in the last
// hour is exact to the minute and an older one is rounded to the hour: a +05:30 zone's
// midnight, 18:30Z, reads from 18:00Z once it is over an hour old, so the half hour before
// midnight counts. A month's start older than two days is rounded to the UTC day: in a zone
// other than UTC some hours of the previous month count (5 in New York, 18.5 in Kolkata); give
// the metric hour slots that cover a month (cost=1m:60+1h:768) where that matters.
//
// # Levels
//
// levels: (Rule.Levels, issue #29) bounds every level of a key, as a policy's levels do:
//
//	rules:
//	  - {name: org-tokens, metric: tokens, agg: sum, window: calendar_month, levels: {separator: "/", max: [50000, 20000, 5000]}}
//
// For org-1/team-a/user-7 the rule reads org-1 (the series of org-1 and of every key under
// org-1/, merged), org-1/team-a (likewise) and org-1/team-a/user-7 (the key itself: the last
// level holds the rest of the key, separators and all), and denies at the first from the top
// whose aggregate is over its max, with Decision.Level its key ("level":"org-1/team-a") and
// that level's RetryAfter as above; allowed, the decision is the level nearest its max (the
// smallest Remaining). A key with fewer parts is checked at the levels it has, each over its
// whole prefix: org-1/team-a against the team's max and the team's total. Each level above the
// last is a merged read of the series under its prefix, which the store's level index
// (window.LevelIndex, made by NewChecker) lists, so it folds the prefix's own series and not
// the metric's, and answers from the prefix's cached aggregate while none of them has been
// written since: on 300 series a three-level check costs about 2.3× a one-level one in CPU
// (BenchmarkRuleLevels), and with an event under the team before each check, which makes
// both levels fold their 100 and 10 series, about 13× (BenchmarkRuleLevelsWritten). The
// answers are the scan's (TestRuleLevelsMatchScan, window's TestLevelIndexMatchesScan). The
// index costs the metric's series about 150 bytes each and an atomic add per level above the
// key on each of their events. Through the cluster a level is read as two keys, the prefix
// and prefix/*, merged here; quantiles do not merge that way, so a rule with levels takes
// count, sum, avg, min, max or rate. Key must be the default {key}, and the rule takes no
// max of its own. A plan cannot set the max of a rule with levels (it has one max per
// level, a plan gives a rule one): a plans file naming it is refused at load with its line
// (PlanRefusal).
// Service.Quota (GET /v1/quota) lists every level's limit, used and remaining (CheckLevels).
//
// # Several instances
//
// When other instances of the consumer group own part of the topic, SetReader makes the
// checkers read through the cluster (package cluster): this instance's part of the window
// fresh, the others' at most the cluster's staleness (1 s) old; the decision says so
// (Decision.Remote, Stale; "stale_ms" in JSON). A window that cannot be read whole follows
// the rule's on_unavailable: open (the default) allows with Degraded set, closed fails the
// decision with limiter.ErrBackendUnavailable (503). A rule with match: reads through a
// SelectReader (the cluster sends the matchers to each owner, which answers one partial of
// the series they select); through a Reader that cannot select, its decisions fail rather
// than read other series.
package usage
