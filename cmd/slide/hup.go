package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// keepOnHUP logs msg at every SIGHUP until ctx ends, and does nothing else. SIGHUP is a
// reload signal (kill -HUP after a certificate renewal, systemd's ExecReload) that reaches
// every slide it is sent to, and its default action ends the process without a word: a
// serve without --plans or --tls-cert, whose handlers reload those, lost its windows, and
// slide broker its log.
func keepOnHUP(ctx context.Context, log *slog.Logger, msg string) {
	onHUP(ctx, func() { log.Warn(msg) })
}

// onHUP calls fn at every SIGHUP until ctx ends. Notify is registered before it returns,
// so a SIGHUP sent once the caller is up never kills the process.
func onHUP(ctx context.Context, fn func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				fn()
			}
		}
	}()
}
