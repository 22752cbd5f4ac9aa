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
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	_ "github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	_ "github.com/eimhq/eim/proto/eim/provisioning/v1/provisioningv1connect"
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

// tool finds a code generator on PATH or in ~/go/bin.
func tool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, "go", "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skipf("%s not installed", name)
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

// TestBufLint runs buf lint (configuration in buf.yaml) when buf is
// installed.
func TestBufLint(t *testing.T) {
	buf := tool(t, "buf")
	cmd := exec.Command(buf, "lint")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("buf lint: %v\n%s", err, b)
	}
}
