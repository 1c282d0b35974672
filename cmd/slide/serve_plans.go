package main

import (
	"context"
	"log/slog"

	"github.com/slide-metrics/slide/limiter"
)

// watchPlans reloads the plans file into svc when it changes on disk and on every SIGHUP,
// until ctx ends (watchConfig). A file that does not load keeps the plans in use: logged,
// and counted in slide_limiter_plan_updates_total{source="file",result="refused"}.
func watchPlans(ctx context.Context, svc *limiter.Service, path string, log *slog.Logger) {
	watchConfig(ctx, path, "plans file changed", nil, func(why string) {
		if err := svc.LoadPlans(path); err != nil {
			log.Error(why+": reloading the plans failed; keeping the previous plans", "plans", path, "err", err)
			return
		}
		log.Info(why+": plans reloaded", "plans", path, "plans_listed", len(svc.Plans().Names()))
	})
}
