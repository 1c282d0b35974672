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

// plansPoll is how often --plans is checked for a change (its size or modification time).
const plansPoll = time.Second

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
		tick := time.NewTicker(plansPoll)
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

// keepOnHUP keeps SIGHUP from ending serve (Go's default for a signal nobody
// handles) until the returned stop: reload hooks (systemd's ExecReload, a config
// reloader) send it whatever serve runs. --tls-cert and --plans reload on it
// through their own handlers; --rls-config is read at start, so each SIGHUP says
// that a restart applies it rather than leaving the operator to guess.
func keepOnHUP(rlsConfig string, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				if rlsConfig != "" {
					log.Warn("SIGHUP: --rls-config is read at start only; restart slide serve to apply changes to it", "rls_config", rlsConfig)
				}
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}
