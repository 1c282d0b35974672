package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/proctest"
)

// The manifests of deploy/kubernetes, as far as the tests read them.
type (
	k8sObject struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	}
	k8sSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	k8sProbe struct {
		PeriodSeconds    int `yaml:"periodSeconds"`
		FailureThreshold int `yaml:"failureThreshold"`
		HTTPGet          *struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"` // a number or a port's name
		} `yaml:"httpGet"`
	}
	k8sContainer struct {
		Name    string   `yaml:"name"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
		Lifecycle      *struct {
			PreStop *struct {
				Sleep *struct {
					Seconds int `yaml:"seconds"`
				} `yaml:"sleep"`
			} `yaml:"preStop"`
		} `yaml:"lifecycle"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	k8sDeployment struct {
		Spec struct {
			Replicas int         `yaml:"replicas"`
			Selector k8sSelector `yaml:"selector"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec struct {
					TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
					SecurityContext               struct {
						RunAsNonRoot bool  `yaml:"runAsNonRoot"`
						RunAsUser    int64 `yaml:"runAsUser"`
					} `yaml:"securityContext"`
					Containers []k8sContainer `yaml:"containers"`
					Volumes    []struct {
						Name      string `yaml:"name"`
						ConfigMap *struct {
							Name string `yaml:"name"`
						} `yaml:"configMap"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	k8sService struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Port       int    `yaml:"port"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	k8sPDB struct {
		Spec struct {
			MinAvailable   *int        `yaml:"minAvailable"`
			MaxUnavailable *int        `yaml:"maxUnavailable"`
			Selector       k8sSelector `yaml:"selector"`
		} `yaml:"spec"`
	}
	k8sConfigMap struct {
		Data map[string]string `yaml:"data"`
	}
	k8sKustomization struct {
		Resources []string `yaml:"resources"`
	}
)

// deployManifests reads every YAML document of deploy/kubernetes, by kind (one of each).
func deployManifests(t *testing.T) map[string]*yaml.Node {
	t.Helper()
	const dir = "../../deploy/kubernetes"
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	byKind := map[string]*yaml.Node{}
	var resources []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) != "kustomization.yaml" {
			resources = append(resources, filepath.Base(f))
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var o k8sObject
			if err := n.Decode(&o); err != nil || o.Kind == "" {
				t.Fatalf("%s: a document without a kind: %v", f, err)
			}
			if byKind[o.Kind] != nil {
				t.Fatalf("%s: a second %s", f, o.Kind)
			}
			byKind[o.Kind] = &n
		}
	}
	for _, kind := range []string{"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "Kustomization"} {
		if byKind[kind] == nil {
			t.Fatalf("deploy/kubernetes has no %s", kind)
		}
	}
	var k k8sKustomization
	decodeNode(t, byKind["Kustomization"], &k)
	slices.Sort(k.Resources)
	if !slices.Equal(k.Resources, resources) {
		t.Errorf("kustomization.yaml lists %v, the directory holds %v", k.Resources, resources)
	}
	return byKind
}

func decodeNode(t *testing.T, n *yaml.Node, v any) {
	t.Helper()
	if err := n.Decode(v); err != nil {
		t.Fatal(err)
	}
}

// serveFlagSet returns the flag set `slide serve` parses its command line with.
func serveFlagSet(t *testing.T) *flag.FlagSet {
	t.Helper()
	var mu sync.Mutex
	var fs *flag.FlagSet
	flagSetHook = func(f *flag.FlagSet) { mu.Lock(); fs = f; mu.Unlock() }
	defer func() { flagSetHook = nil }()
	if code := run(context.Background(), []string{"serve", "--help"}, stdio{strings.NewReader(""), io.Discard, io.Discard}); code != 0 || fs == nil {
		t.Fatalf("slide serve --help: exit %d", code)
	}
	fs.SetOutput(io.Discard)
	return fs
}

// dockerInstr is one instruction of deploy/Dockerfile, with the index of its stage.
type dockerInstr struct {
	stage    int
	op, args string
}

func readDockerfile(t *testing.T) []dockerInstr {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstr
	stage := -1
	// Continuation lines are joined first, comments dropped.
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, args, _ := strings.Cut(line, " ")
		op = strings.ToUpper(op)
		if op == "FROM" {
			stage++
		}
		if stage < 0 && op != "ARG" {
			t.Fatalf("Dockerfile: %s before FROM", op)
		}
		out = append(out, dockerInstr{stage, op, strings.TrimSpace(args)})
	}
	return out
}

// TestDeployDockerfile: the image builds ./cmd/slide as a static binary in a build stage,
// copies only it into the final stage, runs it as a non-root user, `slide serve` on every
// interface at the port it exposes.
func TestDeployDockerfile(t *testing.T) {
	ins := readDockerfile(t)
	last := ins[len(ins)-1].stage
	if last < 1 {
		t.Fatal("Dockerfile: want a build stage and a final stage")
	}
	var built, copied, user, expose string
	var entry, cmd []string
	goBuild := regexp.MustCompile(`\bgo build\b.*-o (\S+) \./cmd/slide\b`)
	for _, in := range ins {
		switch {
		case in.op == "RUN" && in.stage < last:
			if m := goBuild.FindStringSubmatch(in.args); m != nil {
				if !strings.Contains(in.args, "CGO_ENABLED=0") {
					t.Errorf("Dockerfile: the build of ./cmd/slide is not static (no CGO_ENABLED=0): %s", in.args)
				}
				built = m[1]
			}
		case in.op == "COPY" && in.stage == last:
			f := strings.Fields(in.args)
			if len(f) != 3 || !strings.HasPrefix(f[0], "--from=") || f[1] != built {
				t.Errorf("Dockerfile: the final stage copies %q; want only the binary built (%s) from the build stage", in.args, built)
			}
			copied = f[2]
		case in.op == "USER" && in.stage == last:
			user = in.args
		case in.op == "EXPOSE" && in.stage == last:
			expose = in.args
		case in.op == "ENTRYPOINT" && in.stage == last:
			if err := json.Unmarshal([]byte(in.args), &entry); err != nil {
				t.Errorf("Dockerfile: ENTRYPOINT is not in exec form (a JSON array, so SIGTERM reaches slide): %v", err)
			}
		case in.op == "CMD" && in.stage == last:
			if err := json.Unmarshal([]byte(in.args), &cmd); err != nil {
				t.Errorf("Dockerfile: CMD is not a JSON array: %v", err)
			}
		}
	}
	if built == "" {
		t.Fatal("Dockerfile: no build stage runs go build -o FILE ./cmd/slide")
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		t.Errorf("Dockerfile: the final stage runs as %q; want a non-root user", user)
	}
	if !slices.Equal(entry, []string{copied, "serve"}) {
		t.Errorf("Dockerfile: ENTRYPOINT %q, want [%q \"serve\"]", entry, copied)
	}
	fs := serveFlagSet(t)
	if err := fs.Parse(cmd); err != nil {
		t.Fatalf("Dockerfile: CMD %q: %v", cmd, err)
	}
	host, port, err := net.SplitHostPort(fs.Lookup("addr").Value.String())
	if err != nil || host != "" || port != expose {
		t.Errorf("Dockerfile: serve listens on %q (%v); want every interface at the EXPOSEd port %s", fs.Lookup("addr").Value, err, expose)
	}
}

// TestDeployKubernetes: the manifests hang together (selectors, ports, the policies volume),
// every flag of the container is one `slide serve` has, and serve started with those flags
// (the broker and listen addresses swapped for local ones) loads the ConfigMap's policies,
// joins the group and answers the probes' paths with 200.
func TestDeployKubernetes(t *testing.T) {
	docs := deployManifests(t)
	var dep k8sDeployment
	var svc k8sService
	var pdb k8sPDB
	var cm k8sConfigMap
	var cmMeta k8sObject
	decodeNode(t, docs["Deployment"], &dep)
	decodeNode(t, docs["Service"], &svc)
	decodeNode(t, docs["PodDisruptionBudget"], &pdb)
	decodeNode(t, docs["ConfigMap"], &cm)
	decodeNode(t, docs["ConfigMap"], &cmMeta)

	spec, pod := dep.Spec, dep.Spec.Template.Spec
	if spec.Replicas != 3 {
		t.Errorf("Deployment: %d replicas, want 3", spec.Replicas)
	}
	labels := spec.Template.Metadata.Labels
	selects := func(what string, sel map[string]string) {
		if len(sel) == 0 {
			t.Errorf("%s: empty selector", what)
		}
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("%s: selector %s=%s does not match the pods' labels %v", what, k, v, labels)
			}
		}
	}
	selects("Deployment", spec.Selector.MatchLabels)
	selects("Service", svc.Spec.Selector)
	selects("PodDisruptionBudget", pdb.Spec.Selector.MatchLabels)
	switch p := pdb.Spec; {
	case p.MaxUnavailable != nil && (*p.MaxUnavailable < 1 || *p.MaxUnavailable >= spec.Replicas),
		p.MinAvailable != nil && (*p.MinAvailable < 1 || *p.MinAvailable >= spec.Replicas),
		(p.MaxUnavailable == nil) == (p.MinAvailable == nil):
		t.Errorf("PodDisruptionBudget: want one of maxUnavailable, minAvailable, leaving between 1 and %d replicas up", spec.Replicas-1)
	}
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == 0 {
		t.Errorf("Deployment: pods must run as non-root (runAsNonRoot, runAsUser %d)", pod.SecurityContext.RunAsUser)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("Deployment: %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Command) > 0 {
		t.Errorf("Deployment: command %q replaces the image's `slide serve` entrypoint; give serve's flags as args", c.Command)
	}

	// $(VAR) in args is expanded by Kubernetes from the container's env; the pod's IP is
	// this host's loopback here.
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = "127.0.0.1"
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		}
		if strings.HasPrefix(e.Name, "SLIDE_") {
			t.Errorf("Deployment: set serve's flags as args, not as %s (a typo in a variable is ignored, in a flag refused)", e.Name)
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var args []string
	for _, a := range c.Args {
		args = append(args, ref.ReplaceAllStringFunc(a, func(m string) string {
			v, ok := env[m[2:len(m)-1]]
			if !ok {
				t.Errorf("Deployment: %q refers to %s, which the container's env does not set", a, m)
			}
			return v
		}))
	}
	fs := serveFlagSet(t)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Deployment: args %q are not `slide serve`'s: %v", c.Args, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("Deployment: args %q left over after serve's flags", fs.Args())
	}
	val := func(name string) string { return fs.Lookup(name).Value.String() }
	for _, name := range []string{"brokers", "group", "advertise-addr", "policies"} {
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
		if !set || val(name) == "" {
			t.Errorf("Deployment: --%s is not set; several instances need it", name)
		}
	}

	// Ports: --addr's is the container's http port, the Service's target, the probes', and
	// the one the instances advertise to each other.
	host, addrPort, err := net.SplitHostPort(val("addr"))
	if err != nil || host != "" {
		t.Fatalf("Deployment: --addr %q must listen on every interface (:PORT): %v", val("addr"), err)
	}
	if _, advPort, err := net.SplitHostPort(val("advertise-addr")); err != nil || advPort != addrPort {
		t.Errorf("Deployment: --advertise-addr %q is not --addr's port %s", val("advertise-addr"), addrPort)
	}
	portOf := func(what, p string) {
		for _, cp := range c.Ports {
			if p == cp.Name || p == strconv.Itoa(cp.ContainerPort) {
				if strconv.Itoa(cp.ContainerPort) != addrPort {
					t.Errorf("%s: port %s is %d, serve listens on %s", what, p, cp.ContainerPort, addrPort)
				}
				return
			}
		}
		t.Errorf("%s: port %q is not a port of the container", what, p)
	}
	if len(c.Ports) == 0 {
		t.Fatal("Deployment: the container declares no port")
	}
	for _, cp := range c.Ports {
		portOf("Deployment", cp.Name)
	}
	for _, sp := range svc.Spec.Ports {
		portOf("Service", sp.TargetPort)
	}
	probes := map[string]*k8sProbe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe}
	for want, p := range probes {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want {
			t.Fatalf("Deployment: want an HTTP probe on %s", want)
		}
		portOf("probe "+want, p.HTTPGet.Port)
	}
	// After a rebalance every instance that gained partitions answers /readyz 503 while it
	// restores them, all at once (measured: both survivors of three when one left). Taken out
	// after 10 s of it, they left the Service without an endpoint, and POST /v1/allow, which
	// needs no window, down with them, whenever a restore took longer than that.
	if r := c.ReadinessProbe; cmp.Or(r.PeriodSeconds, 10)*cmp.Or(r.FailureThreshold, 3) < 30 {
		t.Errorf("Deployment: the readiness probe takes a pod out after %d s × %d failures; want at least 30 s, so that the restores of a rebalance do not empty the Service",
			cmp.Or(r.PeriodSeconds, 10), cmp.Or(r.FailureThreshold, 3))
	}
	// Services and ingresses may still send a terminating pod requests for a few seconds,
	// over new connections and kept-alive ones: --shutdown-delay keeps serve answering
	// meanwhile, /readyz 503 and every answer closing its connection (TestShutdownDelayDrainsBeforeClosing).
	// A preStop sleep alone kept the listener open but not the clients' kept-alive
	// connections moving: at SIGTERM serve closed them under requests sent on them.
	delay, _ := time.ParseDuration(val("shutdown-delay"))
	if delay < 5*time.Second {
		t.Errorf("Deployment: --shutdown-delay %v; want at least 5s, so a rolling restart drops no request", delay)
	}
	var preStop time.Duration
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	}
	shutdown, _ := time.ParseDuration(val("shutdown-timeout"))
	if g, need := time.Duration(pod.TerminationGracePeriodSeconds)*time.Second, preStop+delay+shutdown+ingest.DefaultSnapshotFinal; g <= need {
		t.Errorf("Deployment: terminationGracePeriodSeconds %v must exceed the preStop sleep %v, --shutdown-delay %v, --shutdown-timeout %v and the final snapshot's %v, or SIGKILL cuts the drain",
			g, preStop, delay, shutdown, ingest.DefaultSnapshotFinal)
	}

	// --policies is a key of the ConfigMap, mounted where the flag looks.
	dir, file := path.Split(val("policies"))
	mounted := false
	for _, m := range c.VolumeMounts {
		if strings.TrimSuffix(m.MountPath, "/")+"/" != dir {
			continue
		}
		for _, v := range pod.Volumes {
			mounted = mounted || v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cmMeta.Metadata.Name
		}
	}
	policies, ok := cm.Data[file]
	if !mounted || !ok {
		t.Fatalf("Deployment: --policies %s is not the key %q of ConfigMap %s mounted at %s", val("policies"), file, cmMeta.Metadata.Name, dir)
	}

	// serve with the manifest's flags, on a local broker and address.
	policyFile := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(policyFile, []byte(policies), 0o600); err != nil {
		t.Fatal(err)
	}
	broker := kafkatest.Start(t, val("topic"), spec.Replicas)
	addr := freeAddr(t)
	// The drain stays in the run, shortened: this test's stop need not wait 5 s.
	local := map[string]string{"addr": addr, "advertise-addr": addr, "brokers": broker.Addr, "policies": policyFile, "shutdown-delay": "100ms"}
	var runArgs []string
	fs.Visit(func(f *flag.Flag) {
		v := f.Value.String()
		if l, ok := local[f.Name]; ok {
			v = l
		}
		runArgs = append(runArgs, "--"+f.Name+"="+v)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb proctest.Buffer
	go func() {
		done <- run(ctx, append([]string{"serve"}, runArgs...), stdio{strings.NewReader(""), io.Discard, &errb})
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d:\n%s", code, errb.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop after its context ended")
		}
	}()
	waitHTTP(t, "http://"+addr+"/healthz").Body.Close()
	for path := range probes {
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve %q: GET %s: %d %s\n%s", runArgs, path, resp.StatusCode, body, errb.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The ConfigMap's policies are the ones serve decides with.
	resp, err := http.Post("http://"+addr+"/v1/allow", "application/json", strings.NewReader(`{"policy":"api","key":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"allowed":true`) {
		t.Errorf("POST /v1/allow with the ConfigMap's policy api: %d %s", resp.StatusCode, body)
	}
}
