// Package swtpmtest starts a software TPM 2.0 (Debian's swtpm) for tests
// of code that talks to a node's TPM: sealing disk keys (fde/tpmseal),
// quoting measured boots (attest/tpmquote), and systemd's tools unsealing
// what EIM sealed (through tpm2-tss's swtpm TCTI).
package swtpmtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// TPM is a running swtpm with its state in a directory, reached over a
// Unix socket (Start) or 127.0.0.1 (StartTCTI) through Conn: the same
// directory gives the same TPM (its seeds) after a restart, with its PCRs
// reset.
type TPM struct {
	Conn net.Conn
	dial func() (net.Conn, error)
	tcti string
	stop func()
	once sync.Once
}

// Start starts swtpm on state directory dir (empty: a new TPM, with new
// seeds), stopped at the test's end. It skips the test without swtpm,
// unless EIM_REQUIRE_SECUREBOOT is set (as .ci/run sets it, after
// installing it).
func Start(t testing.TB, dir string) *TPM {
	t.Helper()
	needSwtpm(t)
	sock := filepath.Join(dir, "s")
	_ = os.Remove(sock)
	s, err := start(t, dir, []string{"--server", "type=unixio,path=" + sock},
		func() (net.Conn, error) { return net.Dial("unix", sock) })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// StartTCTI starts swtpm on state directory dir as Start does, but
// listening on 127.0.0.1: TPM commands on a port, its control channel on
// the next, as the tpm2-tss "swtpm" TCTI expects, so that programs built on
// tpm2-tss (systemd's) reach it through TCTI(). swtpm serves one
// connection at a time: Conn is open for Extend, PCRs and Go code; Lend
// closes it while another program talks to the TPM.
func StartTCTI(t testing.TB, dir string) *TPM {
	t.Helper()
	needSwtpm(t)
	var errs []error
	for range 5 {
		port, err := freePortPair()
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s, err := start(t, dir, []string{
			"--server", fmt.Sprintf("type=tcp,port=%d,bindaddr=127.0.0.1", port),
			"--ctrl", fmt.Sprintf("type=tcp,port=%d,bindaddr=127.0.0.1", port+1),
		}, func() (net.Conn, error) { return net.Dial("tcp", addr) })
		if err == nil {
			s.tcti = fmt.Sprintf("swtpm:host=127.0.0.1,port=%d", port)
			return s
		}
		errs = append(errs, err) // another process took the port meanwhile: try others
	}
	t.Fatalf("swtpm on 127.0.0.1: %v", errors.Join(errs...))
	return nil
}

// freePortPair returns a port p of 127.0.0.1 such that p and p+1 are free
// now.
func freePortPair() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1)))
		l.Close()
		if err == nil {
			l2.Close()
			return p, nil
		}
	}
	return 0, errors.New("no two free consecutive ports on 127.0.0.1")
}

func needSwtpm(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("swtpm"); err != nil {
		if os.Getenv("EIM_REQUIRE_SECUREBOOT") != "" {
			t.Fatal("swtpm not installed and EIM_REQUIRE_SECUREBOOT is set")
		}
		t.Skip("swtpm not installed (Debian's swtpm)")
	}
}

// start runs swtpm on dir with the listening arguments args and connects
// with dial.
func start(t testing.TB, dir string, args []string, dial func() (net.Conn, error)) (*TPM, error) {
	t.Helper()
	cmd := exec.Command("swtpm", append(append([]string{"socket", "--tpm2", "--tpmstate", "dir=" + dir}, args...),
		"--flags", "not-need-init,startup-clear")...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s := &TPM{dial: dial}
	s.stop = func() {
		if s.Conn != nil {
			s.Conn.Close()
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := dial()
		if err == nil {
			s.Conn = c
			return s, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("swtpm exited: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("swtpm did not listen in 20 s: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling for the socket, with the deadline above
	}
}

// Stop stops swtpm (again: nothing).
func (s *TPM) Stop() {
	s.once.Do(s.stop)
}

// TCTI is the tpm2-tss TCTI of a TPM StartTCTI started, as systemd takes it
// (tpm2-device=, --tpm2-device=, $SYSTEMD_TPM2_DEVICE).
func (s *TPM) TCTI() string { return s.tcti }

// Lend runs f with Conn closed, so that another program can talk to the
// TPM (swtpm serves one connection at a time), then opens Conn again.
func (s *TPM) Lend(t testing.TB, f func()) {
	t.Helper()
	s.Conn.Close()
	f()
	c, err := s.dial()
	if err != nil {
		t.Fatalf("swtpm after lending it: %v", err)
	}
	s.Conn = c
	s.flushAll(t)
}

// flushAll flushes the transient objects and sessions another program
// left in the TPM, as the kernel's resource manager does when a client
// goes (swtpm has none).
func (s *TPM) flushAll(t testing.TB) {
	t.Helper()
	tpm := transport.FromReadWriter(s.Conn)
	for _, first := range []tpm2.TPMHandle{0x80000000, 0x02000000, 0x03000000} { // transient, loaded and saved sessions
		r, err := tpm2.GetCapability{Capability: tpm2.TPMCapHandles, Property: uint32(first), PropertyCount: 64}.Execute(tpm)
		if err != nil {
			t.Fatalf("swtpm: list handles: %v", err)
		}
		hs, err := r.CapabilityData.Data.Handles()
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs.Handle {
			if h>>24 != first>>24 {
				continue
			}
			_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(tpm)
		}
	}
}

// Extend extends the TPM's SHA-256 PCR pcr with digest, as firmware
// measures what it runs.
func (s *TPM) Extend(t testing.TB, pcr int, digest []byte) {
	t.Helper()
	_, err := tpm2.PCRExtend{
		PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(pcr), Auth: tpm2.PasswordAuth(nil)},
		Digests:   tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: digest}}},
	}.Execute(transport.FromReadWriter(s.Conn))
	if err != nil {
		t.Fatalf("extend PCR %d: %v", pcr, err)
	}
}

// PCRs reads the TPM's SHA-256 values of pcrs, as a node reports them.
func (s *TPM) PCRs(t testing.TB, pcrs []int) map[int][]byte {
	t.Helper()
	out := map[int][]byte{}
	for _, p := range pcrs {
		r, err := tpm2.PCRRead{PCRSelectionIn: tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{
			{Hash: tpm2.TPMAlgSHA256, PCRSelect: tpm2.PCClientCompatible.PCRs(uint(p))},
		}}}.Execute(transport.FromReadWriter(s.Conn))
		if err != nil {
			t.Fatalf("read PCR %d: %v", p, err)
		}
		out[p] = r.PCRValues.Digests[0].Buffer
	}
	return out
}

// CA is a local CA of swtpm's (swtpm_localca, with its state in Dir: a root
// CA and an intermediate that signs), which signs the EK certificates
// Manufacture writes into a TPM's NV, as a TPM maker's CA does. Its keys
// are made at its first certificate.
type CA struct {
	Dir string
}

// NewCA returns a CA in a new directory; its certificates are made by the
// first Manufacture with it.
func NewCA(t testing.TB) *CA {
	t.Helper()
	return &CA{Dir: t.TempDir()}
}

// RootPEM is the CA's root certificate (PEM).
func (ca *CA) RootPEM(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ca.Dir, "swtpm-localca-rootca-cert.pem"))
	if err != nil {
		t.Fatalf("the local CA's root certificate (no TPM manufactured with it yet?): %v", err)
	}
	return b
}

// BundlePEM is the CA's root and intermediate certificates (PEM), as a TPM
// maker publishes its CAs: what a deployment configures.
func (ca *CA) BundlePEM(t testing.TB) []byte {
	t.Helper()
	return append(ca.RootPEM(t), ca.IssuerPEM(t)...)
}

// IssuerPEM is the certificate of the CA's intermediate, which signs the
// EK certificates.
func (ca *CA) IssuerPEM(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ca.Dir, "issuercert.pem"))
	if err != nil {
		t.Fatalf("the local CA's issuer certificate: %v", err)
	}
	return b
}

// Manufacture makes a new TPM's state in dir with its EK certificates
// signed by ca, as its maker does: swtpm_setup creates its endorsement keys
// and writes the certificates swtpm makes (the RSA 2048 EK's at NV index
// 0x01c00002, the ECC NIST P-384 EK's at 0x01c00016); then the certificate
// of the ECC NIST P-256 EK of the TCG's default template (the EK the agent
// uses) is issued by the same tool, swtpm_localca, with ca, and written at
// 0x01c0000a, where the TCG EK Credential Profile puts it. Start then runs
// that TPM. It skips without swtpm_setup and swtpm_localca (Debian's
// swtpm-tools), unless EIM_REQUIRE_SECUREBOOT is set.
func Manufacture(t testing.TB, dir string, ca *CA) {
	t.Helper()
	manufacture(t, dir, ca, true)
}

// ManufactureSwtpm is Manufacture without the P-256 EK's certificate: what
// swtpm_setup alone makes (RSA 2048 and ECC P-384 EKs' certificates).
func ManufactureSwtpm(t testing.TB, dir string, ca *CA) {
	t.Helper()
	manufacture(t, dir, ca, false)
}

// eccEKCertIndex is the NV index of the ECC NIST P-256 EK's certificate.
const eccEKCertIndex = 0x01c0000a

func manufacture(t testing.TB, dir string, ca *CA, p256 bool) {
	t.Helper()
	for _, tool := range []string{"swtpm", "swtpm_setup", "swtpm_localca"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("EIM_REQUIRE_SECUREBOOT") != "" {
				t.Fatalf("%s not installed and EIM_REQUIRE_SECUREBOOT is set", tool)
			}
			t.Skipf("%s not installed (Debian's swtpm-tools)", tool)
		}
	}
	localca, _ := exec.LookPath("swtpm_localca")
	conf := filepath.Join(ca.Dir, "swtpm-localca.conf")
	write(t, conf, "statedir = "+ca.Dir+"\n"+
		"signingkey = "+filepath.Join(ca.Dir, "signkey.pem")+"\n"+
		"issuercert = "+filepath.Join(ca.Dir, "issuercert.pem")+"\n"+
		"certserial = "+filepath.Join(ca.Dir, "certserial")+"\n")
	opts := filepath.Join(ca.Dir, "swtpm-localca.options")
	write(t, opts, "--platform-manufacturer EIM\n--platform-version 1\n--platform-model test\n")
	setup := filepath.Join(ca.Dir, "swtpm_setup.conf")
	write(t, setup, "create_certs_tool = "+localca+"\n"+
		"create_certs_tool_config = "+conf+"\n"+
		"create_certs_tool_options = "+opts+"\n")
	run(t, "swtpm_setup", "--tpm2", "--tpmstate", dir, "--overwrite", "--create-ek-cert", "--config", setup)
	if !p256 {
		return
	}
	s := Start(t, dir)
	defer s.Stop()
	tpm := transport.FromReadWriter(s.Conn)
	ek, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(tpm2.ECCEKTemplate),
	}.Execute(tpm)
	if err != nil {
		t.Fatalf("create the ECC EK: %v", err)
	}
	_, _ = tpm2.FlushContext{FlushHandle: ek.ObjectHandle}.Execute(tpm)
	pub, err := ek.OutPublic.Contents()
	if err != nil {
		t.Fatal(err)
	}
	pt, err := pub.Unique.ECC()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// As swtpm_setup invokes it for its own EKs (the TPM's maker, model
	// and version are swtpm's).
	run(t, localca, "--type", "ek", "--ek", fmt.Sprintf("x=%x,y=%x,id=secp256r1", pt.X.Buffer, pt.Y.Buffer), "--dir", out,
		"--tpm-spec-family", "2.0", "--tpm-spec-level", "0", "--tpm-spec-revision", "164",
		"--tpm-manufacturer", "id:00001014", "--tpm-model", "swtpm", "--tpm-version", "id:20191023",
		"--tpm2", "--configfile", conf, "--optsfile", opts)
	cert, err := os.ReadFile(filepath.Join(out, "ek.cert"))
	if err != nil {
		t.Fatalf("swtpm_localca wrote no certificate: %v", err)
	}
	// Defined by the platform, readable with the index's own empty
	// authorization or the owner's, as makers define it.
	def := tpm2.NVDefineSpace{
		AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHPlatform, Auth: tpm2.PasswordAuth(nil)},
		PublicInfo: tpm2.New2B(tpm2.TPMSNVPublic{
			NVIndex: tpm2.TPMHandle(eccEKCertIndex),
			NameAlg: tpm2.TPMAlgSHA256,
			Attributes: tpm2.TPMANV{PPWrite: true, WriteDefine: true, PPRead: true, OwnerRead: true, AuthRead: true,
				NoDA: true, PlatformCreate: true, NT: tpm2.TPMNTOrdinary},
			DataSize: uint16(len(cert)),
		}),
	}
	if _, err := def.Execute(tpm); err != nil {
		t.Fatalf("define NV index 0x%08x: %v", eccEKCertIndex, err)
	}
	for off := 0; off < len(cert); off += 512 {
		rp, err := tpm2.NVReadPublic{NVIndex: tpm2.TPMHandle(eccEKCertIndex)}.Execute(tpm)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tpm2.NVWrite{
			AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHPlatform, Auth: tpm2.PasswordAuth(nil)},
			NVIndex:    tpm2.NamedHandle{Handle: tpm2.TPMHandle(eccEKCertIndex), Name: rp.NVName},
			Data:       tpm2.TPM2BMaxNVBuffer{Buffer: cert[off:min(off+512, len(cert))]},
			Offset:     uint16(off),
		}.Execute(tpm)
		if err != nil {
			t.Fatalf("write the EK certificate at 0x%08x: %v", eccEKCertIndex, err)
		}
	}
	if _, err := (tpm2.Shutdown{ShutdownType: tpm2.TPMSUClear}).Execute(tpm); err != nil {
		t.Fatalf("shut the TPM down: %v", err)
	}
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func write(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
