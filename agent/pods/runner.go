package pods

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
)

// Pod is an edge workload rendered for one device: what Apply runs.
type Pod struct {
	Workload string // names the pod; a DNS label
	Revision int64  // the workload's revision, kept in the pod's label
	// YAML is one Kubernetes Pod document. Its metadata.name and the
	// runner's labels are set by the runner.
	YAML []byte
	// ConfigMaps are Kubernetes ConfigMap documents the pod references.
	ConfigMaps [][]byte
	// Secrets maps a secret's name, as the pod refers to it, to its
	// data (key → value).
	Secrets map[string]map[string][]byte
	// Registries are the credentials kube play pulls the pod's images
	// with. They exist only for the play: in an auth file of the play's
	// temporary directory (mode 0600), passed with --authfile.
	Registries []Registry
}

// Registry is a login to an image registry.
type Registry struct {
	Server   string // host[:port], as in the image reference
	Username string
	Password string
}

// Config is what a Runner needs of its machine.
type Config struct {
	// Podman is the podman binary ("podman" on PATH when empty).
	Podman string
	// ContainersConf, when set, is passed to every podman call as
	// CONTAINERS_CONF (the runtime and ulimits a device needs).
	ContainersConf string
	// Env is the environment of podman calls (the agent's own when nil).
	Env []string
	// Network is kube play's --network ("none", a network's name); podman's
	// default bridge when empty.
	Network string
	// TempDir holds the config map files of a kube play while it runs
	// (the system's temporary directory when empty).
	TempDir string
}

// Runner runs edge workloads as podman pods. Its methods may be called
// from several goroutines, but not for the same workload at once: the
// workload module serialises a workload's changes.
type Runner struct {
	cfg Config
}

// New returns a Runner using cfg.
func New(cfg Config) *Runner {
	if cfg.Podman == "" {
		cfg.Podman = "podman"
	}
	return &Runner{cfg: cfg}
}

// Apply runs p: nothing when its workload's pod at p.Revision exists,
// complete (every container created and started once), else the
// workload's pods are removed and p is played.
func (r *Runner) Apply(ctx context.Context, p Pod) error {
	if !nameRE.MatchString(p.Workload) {
		return eim.Errorf(eim.EINVALID, "workload: %q is not a DNS label (lowercase letters, digits and '-', at most 63)", p.Workload)
	}
	for name := range p.Secrets {
		if !nameRE.MatchString(name) {
			return eim.Errorf(eim.EINVALID, "secrets: %q is not a DNS label", name)
		}
	}
	doc, containers, err := manifest(p)
	if err != nil {
		return err
	}
	var auth []byte
	if len(p.Registries) > 0 {
		if auth, err = authFile(p.Registries); err != nil {
			return err
		}
	}
	infos, err := r.listWhere(ctx, "label="+LabelWorkload+"="+p.Workload)
	if err != nil {
		return err
	}
	if len(infos) == 1 && infos[0].Revision == p.Revision && !infos[0].Incomplete {
		return nil
	}
	if err := r.Remove(ctx, p.Workload); err != nil {
		return err
	}
	// A play killed while it created a container can leave the container
	// in podman's storage but not in its database: no pod lists it, yet
	// its name would fail every later play. podman rm removes such a
	// container by name too.
	names := make([]string, len(containers))
	for i, c := range containers {
		names[i] = p.Workload + "-" + c
	}
	if len(names) > 0 {
		if _, err := r.podman(ctx, append([]string{"rm", "-f", "--ignore"}, names...)...); err != nil {
			return fmt.Errorf("apply %s: remove leftover containers: %w", p.Workload, err)
		}
	}
	for name, data := range p.Secrets {
		if err := r.createSecret(ctx, secretName(p.Workload, name), data); err != nil {
			return err
		}
	}

	dir, err := os.MkdirTemp(r.cfg.TempDir, "eim-pod-")
	if err != nil {
		return fmt.Errorf("apply %s: %w", p.Workload, err)
	}
	defer os.RemoveAll(dir)
	podFile := filepath.Join(dir, "pod.yaml")
	if err := os.WriteFile(podFile, doc, 0o600); err != nil {
		return fmt.Errorf("apply %s: %w", p.Workload, err)
	}
	args := []string{"kube", "play"}
	if r.cfg.Network != "" {
		args = append(args, "--network", r.cfg.Network)
	}
	if auth != nil {
		f := filepath.Join(dir, "auth.json")
		if err := os.WriteFile(f, auth, 0o600); err != nil {
			return fmt.Errorf("apply %s: %w", p.Workload, err)
		}
		args = append(args, "--authfile", f)
	}
	for i, cm := range p.ConfigMaps {
		f := filepath.Join(dir, "configmap-"+strconv.Itoa(i)+".yaml")
		if err := os.WriteFile(f, cm, 0o600); err != nil {
			return fmt.Errorf("apply %s: %w", p.Workload, err)
		}
		args = append(args, "--configmap", f)
	}
	if _, err := r.podman(ctx, append(args, podFile)...); err != nil {
		// kube play leaves a pod half made (an image missing, a container
		// that failed to start): were it kept, its revision label would
		// make the next Apply a no-op. Removed, the next Apply tries again.
		err = fmt.Errorf("apply %s revision %d: %w", p.Workload, p.Revision, err)
		if rerr := r.Remove(context.WithoutCancel(ctx), p.Workload); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// Remove removes the workload's pods, containers and secrets. Removing
// an absent workload is success.
func (r *Runner) Remove(ctx context.Context, workload string) error {
	if !nameRE.MatchString(workload) {
		// Also keeps "" from selecting every workload's pods.
		return eim.Errorf(eim.EINVALID, "workload: %q is not a DNS label", workload)
	}
	pods, err := r.podsOf(ctx, workload)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if _, err := r.podman(ctx, "pod", "rm", "-f", "--ignore", p.ID); err != nil {
			return fmt.Errorf("remove %s: %w", workload, err)
		}
	}
	out, err := r.podman(ctx, "secret", "ls", "--format", "{{.Name}}")
	if err != nil {
		return fmt.Errorf("remove %s: %w", workload, err)
	}
	prefix := secretName(workload, "")
	for _, name := range strings.Fields(string(out)) {
		if strings.HasPrefix(name, prefix) {
			if _, err := r.podman(ctx, "secret", "rm", name); err != nil {
				return fmt.Errorf("remove %s: %w", workload, err)
			}
		}
	}
	return nil
}

// Start starts the workload's pod again (stopped by an operator, or not
// started since the device rebooted). Starting a running pod is success.
func (r *Runner) Start(ctx context.Context, workload string) error {
	if !nameRE.MatchString(workload) {
		return eim.Errorf(eim.EINVALID, "workload: %q is not a DNS label", workload)
	}
	pods, err := r.podsOf(ctx, workload)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		return eim.Errorf(eim.ENOTFOUND, "start: workload %s has no pod", workload)
	}
	for _, p := range pods {
		if _, err := r.podman(ctx, "pod", "start", p.ID); err != nil {
			return fmt.Errorf("start %s: %w", workload, err)
		}
	}
	return nil
}

// authFile is the containers-auth.json of regs: base64 of user:password
// per registry.
func authFile(regs []Registry) ([]byte, error) {
	type entry struct {
		Auth string `json:"auth"`
	}
	auths := map[string]entry{}
	for i, g := range regs {
		if g.Server == "" || strings.ContainsAny(g.Server, "/ ") || g.Username == "" {
			return nil, eim.Errorf(eim.EINVALID, "registries[%d]: a server (host[:port]) and a username are required", i)
		}
		auths[g.Server] = entry{Auth: base64.StdEncoding.EncodeToString([]byte(g.Username + ":" + g.Password))}
	}
	b, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	return b, nil
}

// Logs returns the last tail lines (all when tail <= 0) a container of
// the workload wrote, stdout and stderr merged.
func (r *Runner) Logs(ctx context.Context, workload, container string, tail int) ([]byte, error) {
	if !nameRE.MatchString(workload) || !nameRE.MatchString(container) {
		return nil, eim.Errorf(eim.EINVALID, "logs: workload %q, container %q: not DNS labels", workload, container)
	}
	if tail <= 0 {
		tail = -1
	}
	// kube play names a pod's containers <pod>-<container>. podman logs
	// writes the container's stderr on its own: both are kept, in order.
	out, err := r.run(ctx, nil, true, "logs", "--tail", strconv.Itoa(tail), workload+"-"+container)
	if err != nil {
		var pe *podmanError
		if errors.As(err, &pe) && strings.Contains(pe.stderr, "no such container") {
			return nil, eim.Errorf(eim.ENOTFOUND, "logs: workload %s has no container %s", workload, container)
		}
		return nil, fmt.Errorf("logs %s/%s: %w", workload, container, err)
	}
	return out, nil
}

func (r *Runner) createSecret(ctx context.Context, name string, data map[string][]byte) error {
	// podman 4.3's kube play reads a secret as a JSON object of key →
	// base64 value (as encoding/json writes []byte).
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	// Left over by an interrupted Apply or Remove: replace it.
	if _, err := r.podman(ctx, "secret", "rm", name); err != nil {
		var pe *podmanError
		if !errors.As(err, &pe) || !strings.Contains(pe.stderr, "no such secret") {
			return fmt.Errorf("secret %s: %w", name, err)
		}
	}
	if _, err := r.podmanIn(ctx, b, "secret", "create", name, "-"); err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	return nil
}

// podmanError is a podman call that failed, with what it wrote to stderr.
type podmanError struct {
	args   []string
	err    error
	stderr string
}

func (e *podmanError) Error() string {
	return fmt.Sprintf("podman %s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr)
}

func (e *podmanError) Unwrap() error { return e.err }

func (r *Runner) podman(ctx context.Context, args ...string) ([]byte, error) {
	return r.run(ctx, nil, false, args...)
}

func (r *Runner) podmanIn(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	return r.run(ctx, stdin, false, args...)
}

// run runs podman with args; merged sends its stderr to the output too
// (an error then carries the output).
func (r *Runner) run(ctx context.Context, stdin []byte, merged bool, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.cfg.Podman, args...)
	cmd.Env = r.cfg.Env
	if r.cfg.ContainersConf != "" {
		cmd.Env = append(cmd.Environ(), "CONTAINERS_CONF="+r.cfg.ContainersConf)
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if merged {
		cmd.Stderr = &stdout
	}
	if err := cmd.Run(); err != nil {
		msg := stderr.String()
		if merged {
			msg = stdout.String()
		}
		return stdout.Bytes(), &podmanError{args: args, err: err, stderr: strings.TrimSpace(msg)}
	}
	return stdout.Bytes(), nil
}
