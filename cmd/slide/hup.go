package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
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

// configPoll is how often --plans and --rls-config are checked for a change.
const configPoll = time.Second

// watchConfig calls reload at every SIGHUP (why "SIGHUP") and when path changes on disk
// (why changed): configStamp, checked every configPoll, following symlinks, since a
// Kubernetes ConfigMap is updated by swapping its ..data link and in the distroless image
// nobody can send a SIGHUP. One reload at a time, until ctx ends; Notify is registered
// before it returns (onHUP). A path that cannot be read is no change (a ConfigMap between
// two links): it is read once it is back. ready, when set, says whether a change can be
// applied yet; one seen before is applied at the first check after.
func watchConfig(ctx context.Context, path, changed string, ready func() bool, reload func(why string)) {
	var mu sync.Mutex // one reload at a time; guards last
	last := configStamp(path)
	onHUP(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		last = configStamp(path)
		reload("SIGHUP")
	})
	go func() {
		tick := time.NewTicker(configPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			mu.Lock()
			if st := configStamp(path); st != "" && st != last && (ready == nil || ready()) {
				last = st
				reload(changed)
			}
			mu.Unlock()
		}
	}()
}

// configStamp is the names, sizes and modification times of path, or of the *.yaml and
// *.yml files of the directory path, as rls.Load reads them (symlinks followed); "" when
// path cannot be read.
func configStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	if !st.IsDir() {
		return fmt.Sprint(st.Size(), " ", st.ModTime().UnixNano())
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range ents {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			if fi, err := os.Stat(filepath.Join(path, n)); err == nil {
				fmt.Fprint(&b, n, " ", fi.Size(), " ", fi.ModTime().UnixNano(), "\n")
			}
		}
	}
	return "dir\n" + b.String()
}
