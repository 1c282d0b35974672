package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// configPoll is how often --plans and --rls-config are checked for a change (their size or
// modification time).
const configPoll = time.Second

// watchPlans reloads the plans file into svc when it changes on disk and on every SIGHUP,
// until ctx ends. A file that does not load keeps the plans in use: logged, and counted in
// slide_limiter_plan_updates_total{source="file",result="refused"}. Notify is registered
// before it returns, so a SIGHUP sent once serve is up never kills the process.
func watchPlans(ctx context.Context, svc *limiter.Service, path string, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	stamp := func() (time.Time, int64) {
		fi, err := os.Stat(path)
		if err != nil {
			return time.Time{}, -1
		}
		return fi.ModTime(), fi.Size()
	}
	mod, size := stamp()
	reload := func(why string) {
		if err := svc.LoadPlans(path); err != nil {
			log.Error(why+": reloading the plans failed; keeping the previous plans", "plans", path, "err", err)
			return
		}
		log.Info(why+": plans reloaded", "plans", path, "plans_listed", len(svc.Plans().Names()))
	}
	go func() {
		defer signal.Stop(hup)
		tick := time.NewTicker(configPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				mod, size = stamp()
				reload("SIGHUP")
			case <-tick.C:
				if m, n := stamp(); n >= 0 && (!m.Equal(mod) || n != size) {
					mod, size = m, n
					reload("plans file changed")
				}
			}
		}
	}()
}
