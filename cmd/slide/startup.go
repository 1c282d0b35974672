package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"
)

// bindError explains a listen address that is taken: which flag and which environment
// variable move it (and, for serve, how with make run). Other errors are returned as they are.
func bindError(flagName, addr string, err error) error {
	return bindErrorHint(flagName, addr, err, fmt.Sprintf(", e.g. make run ARGS='--%s 127.0.0.1:PORT'", flagName))
}

func bindErrorHint(flagName, addr string, err error, hint string) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("--%s %s: %w", flagName, addr, err) // named, so a variable's value names the variable
	}
	return fmt.Errorf("--%s %s: address already in use (another slide, or another server, listens there): "+
		"choose a free address with --%s or %s%s", flagName, addr, flagName, envName(flagName), hint)
}

// bannerWait bounds how long the demo banner waits for the windows to be restored: past it
// the banner is printed anyway (a slow start should not look like a hang).
const bannerWait = 15 * time.Second

// printBannerWhenReady prints the demo banner to w once ready reports true (the consumer has
// joined its group and restored its partitions, the last of the startup logs) or bannerWait
// has passed, so that it stands after the startup logs instead of among them.
func printBannerWhenReady(ctx context.Context, w io.Writer, addr string, ready func() bool) {
	deadline := time.Now().Add(bannerWait)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !ready() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	// The consumer logs its generation just after the last partition is restored.
	select {
	case <-ctx.Done():
		return
	case <-time.After(200 * time.Millisecond):
	}
	printDemoHelp(w, addr)
}
