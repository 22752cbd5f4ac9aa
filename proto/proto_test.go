package proto_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	_ "github.com/eimhq/eim/proto/eim/cluster/v1/clusterv1connect"
	_ "github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	_ "github.com/eimhq/eim/proto/eim/maintenance/v1/maintenancev1connect"
	_ "github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	_ "github.com/eimhq/eim/proto/eim/provisioning/v1/provisioningv1connect"
	_ "github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
)

// protoFiles returns the .proto sources, relative to this directory.
func protoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("eim", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".proto") {
			files = append(files, filepath.ToSlash(path))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no .proto files under eim/")
	}
	return files
}

// TestDescriptorsMatchSources compares what each .proto declares (package,
// messages, enums, fields and enum values with their numbers, services and
// methods with their types) with the descriptor compiled into the generated
// Go code, so that a .proto edited without regenerating fails here even
// where protoc is not installed.
func TestDescriptorsMatchSources(t *testing.T) {
	for _, path := range protoFiles(t) {
		t.Run(path, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
			if err != nil {
				t.Fatalf("%s has no generated Go code linked here (regenerate with go generate ./proto and import its package in this test): %v", path, err)
			}
			want := declarations(string(src))
			got := descriptorDeclarations(fd)
			if !slices.Equal(got, want) {
				t.Errorf("generated code is stale (run go generate ./proto):\n only in %s: %v\n only in generated code: %v",
					path, minus(want, got), minus(got, want))
			}
		})
	}
}

var (
	comments  = regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`)
	pkgRe     = regexp.MustCompile(`\bpackage\s+([\w.]+)\s*;`)
	typeRe    = regexp.MustCompile(`\b(message|enum|service)\s+(\w+)\s*\{`)
	numberRe  = regexp.MustCompile(`(\w+)\s*=\s*(\d+)\s*[;\[]`)
	rpcRe     = regexp.MustCompile(`\brpc\s+(\w+)\s*\(\s*(stream\s+)?([\w.]+)\s*\)\s*returns\s*\(\s*(stream\s+)?([\w.]+)\s*\)`)
	reservedR = regexp.MustCompile(`\breserved\b[^;]*;`)
)

// declarations lists a .proto's declarations as sorted strings. It reads
// the subset of the language our files use (no imports of other packages,
// no extensions, no maps or oneofs).
func declarations(src string) []string {
	src = comments.ReplaceAllString(src, "")
	src = reservedR.ReplaceAllString(src, "")
	var out []string
	if m := pkgRe.FindStringSubmatch(src); m != nil {
		out = append(out, "package "+m[1])
	}
	for _, m := range typeRe.FindAllStringSubmatch(src, -1) {
		out = append(out, m[1]+" "+m[2])
	}
	for _, m := range numberRe.FindAllStringSubmatch(src, -1) {
		out = append(out, "number "+m[1]+"="+m[2])
	}
	for _, m := range rpcRe.FindAllStringSubmatch(src, -1) {
		out = append(out, fmt.Sprintf("rpc %s(%s%s) %s%s", m[1], strings.TrimSpace(m[2]), last(m[3]), strings.TrimSpace(m[4]), last(m[5])))
	}
	slices.Sort(out)
	return out
}

func last(name string) string { return name[strings.LastIndex(name, ".")+1:] }

func descriptorDeclarations(fd protoreflect.FileDescriptor) []string {
	out := []string{"package " + string(fd.Package())}
	enums := func(es protoreflect.EnumDescriptors) {
		for i := range es.Len() {
			e := es.Get(i)
			out = append(out, "enum "+string(e.Name()))
			for j := range e.Values().Len() {
				v := e.Values().Get(j)
				out = append(out, fmt.Sprintf("number %s=%d", v.Name(), v.Number()))
			}
		}
	}
	var messages func(ms protoreflect.MessageDescriptors)
	messages = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			m := ms.Get(i)
			out = append(out, "message "+string(m.Name()))
			for j := range m.Fields().Len() {
				f := m.Fields().Get(j)
				out = append(out, fmt.Sprintf("number %s=%d", f.Name(), f.Number()))
			}
			enums(m.Enums())
			messages(m.Messages())
		}
	}
	enums(fd.Enums())
	messages(fd.Messages())
	for i := range fd.Services().Len() {
		s := fd.Services().Get(i)
		out = append(out, "service "+string(s.Name()))
		for j := range s.Methods().Len() {
			m := s.Methods().Get(j)
			stream := func(b bool) string {
				if b {
					return "stream"
				}
				return ""
			}
			out = append(out, fmt.Sprintf("rpc %s(%s%s) %s%s", m.Name(), stream(m.IsStreamingClient()), m.Input().Name(), stream(m.IsStreamingServer()), m.Output().Name()))
		}
	}
	slices.Sort(out)
	return out
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// requireTools makes a missing tool a failure instead of a skip: in CI (CI=true,
// or EIM_REQUIRE_TOOLS=1, which .ci/run sets after .ci/tools.sh), a check
// that cannot run must not pass silently.
func requireTools() bool {
	return os.Getenv("EIM_REQUIRE_TOOLS") == "1" || os.Getenv("CI") == "true"
}

// goBin is where go install puts commands (.ci/tools.sh installs the
// plugins and buf there), "" if the go command cannot say.
var goBin = sync.OnceValue(func() string {
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 2 && lines[0] != "" {
		return lines[0]
	}
	if gopath := filepath.SplitList(lines[len(lines)-1]); len(gopath) > 0 && gopath[0] != "" {
		return filepath.Join(gopath[0], "bin")
	}
	return ""
})

// tool finds a tool in go install's directory (where .ci/tools.sh puts the
// pinned versions), else on PATH. Without it the test is skipped, or fails
// when requireTools says so.
func tool(t *testing.T, name string) string {
	t.Helper()
	if dir := goBin(); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if requireTools() {
		t.Fatalf("%s not installed: run .ci/tools.sh", name)
	}
	t.Skipf("%s not installed (run .ci/tools.sh)", name)
	return ""
}

// versionLines are the generator versions in a generated file's header;
// they differ between machines and say nothing about the content.
var versionLines = regexp.MustCompile(`(?m)^//\s+(protoc|protoc-gen-go|protoc-gen-connect-go)\s+v?[\d.]+.*\n`)

// TestGeneratedCodeIsCurrent regenerates the Go code with protoc into a
// temporary directory and compares it with the committed files, byte for
// byte apart from the generators' versions. Skipped without protoc and the
// plugins.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	protoc := tool(t, "protoc")
	genGo := tool(t, "protoc-gen-go")
	genConnect := tool(t, "protoc-gen-connect-go")
	out := t.TempDir()
	args := []string{
		"--proto_path=.",
		"--plugin=protoc-gen-go=" + genGo, "--plugin=protoc-gen-connect-go=" + genConnect,
		"--go_out=" + out, "--go_opt=paths=source_relative",
		"--connect-go_out=" + out, "--connect-go_opt=paths=source_relative",
	}
	cmd := exec.Command(protoc, append(args, protoFiles(t)...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	n := 0
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		n++
		fresh, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		committed, err := os.ReadFile(rel)
		if err != nil {
			t.Errorf("%s: generated but not committed (run go generate ./proto): %v", rel, err)
			return nil
		}
		if !bytes.Equal(versionLines.ReplaceAll(fresh, nil), versionLines.ReplaceAll(committed, nil)) {
			t.Errorf("%s differs from what protoc generates (run go generate ./proto)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("protoc generated nothing")
	}
}

// TestBufLint runs buf lint (configuration in buf.yaml).
func TestBufLint(t *testing.T) {
	buf := tool(t, "buf")
	cmd := exec.Command(buf, "lint")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("buf lint: %v\n%s", err, b)
	}
}

// released is the descriptor snapshot of the protocol as released agents
// speak it; see generate.go for when and how it is refreshed.
const released = "released.binpb"

// TestBufBreaking checks that the .proto files still speak the released
// protocol (rules in buf.yaml): adding messages, fields and RPCs passes;
// deleting or renumbering them, changing a type, or removing an RPC fails.
func TestBufBreaking(t *testing.T) {
	buf := tool(t, "buf")
	cmd := exec.Command(buf, "breaking", "--against", released)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("buf breaking --against %s: %v\n%s\nThis change breaks agents in the field. Make it additive (new fields, messages, RPCs; reserve what you remove) or start a new package version.", released, err, b)
	}
}

// TestBufBreakingCatchesBreaks applies changes that break agents to a copy
// of the .proto files and expects buf breaking to name each, so that a
// snapshot or configuration that checks nothing cannot pass.
func TestBufBreakingCatchesBreaks(t *testing.T) {
	buf := tool(t, "buf")
	against, err := filepath.Abs(released)
	if err != nil {
		t.Fatal(err)
	}
	fieldRe := regexp.MustCompile(`(?m)^(\s+(?:repeated\s+|optional\s+)?[\w.]+\s+\w+\s*=\s*)(\d+)(\s*[;\[])`)
	rpcLineRe := regexp.MustCompile(`(?m)^\s*rpc\s+\w+\s*\([^)]*\)\s*returns\s*\([^)]*\)\s*;\s*$`)
	cases := []struct {
		name, rule string
		edit       func(src string) string
	}{
		{"fields renumbered", "FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED", func(src string) string {
			return fieldRe.ReplaceAllStringFunc(src, func(m string) string {
				p := fieldRe.FindStringSubmatch(m)
				return p[1] + p[2] + "0000" + p[3]
			})
		}},
		{"rpcs deleted", "RPC_NO_DELETE", func(src string) string { return rpcLineRe.ReplaceAllString(src, "") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyFile(t, "buf.yaml", filepath.Join(dir, "buf.yaml"), nil)
			for _, path := range protoFiles(t) {
				copyFile(t, path, filepath.Join(dir, path), c.edit)
			}
			cmd := exec.Command(buf, "breaking", "--error-format=json", "--against", against)
			cmd.Dir = dir
			b, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(b), `"type":"`+c.rule+`"`) {
				t.Errorf("buf breaking on %s: got %v\n%s\nwant a %s failure", c.name, err, b, c.rule)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edited := edit(string(b))
		if edited == string(b) {
			t.Fatalf("%s: the edit changed nothing", from)
		}
		b = []byte(edited)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReleasedSnapshot checks, without buf, that the snapshot is a
// descriptor set of eim's packages with their services, so that an empty or
// truncated file (against which nothing is ever breaking) fails.
func TestReleasedSnapshot(t *testing.T) {
	b, err := os.ReadFile(released)
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet // a buf image decodes as one
	if err := proto.Unmarshal(b, &set); err != nil {
		t.Fatalf("%s: %v", released, err)
	}
	services := 0
	for _, f := range set.GetFile() {
		if !strings.HasPrefix(f.GetPackage(), "eim.") {
			t.Errorf("%s: file %s has package %q, want eim.*", released, f.GetName(), f.GetPackage())
		}
		services += len(f.GetService())
	}
	if len(set.GetFile()) == 0 || services == 0 {
		t.Fatalf("%s: got %d files with %d services, want the released protocol", released, len(set.GetFile()), services)
	}
}
