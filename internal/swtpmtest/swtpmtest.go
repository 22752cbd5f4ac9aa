// Package swtpmtest starts a software TPM 2.0 (Debian's swtpm) for tests
// of code that talks to a node's TPM: sealing disk keys (fde/tpmseal) and
// quoting measured boots (attest/tpmquote).
package swtpmtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// TPM is a running swtpm with its state in a directory, reached over a
// Unix socket (Conn): the same directory gives the same TPM (its seeds)
// after a restart, with its PCRs reset.
type TPM struct {
	Conn net.Conn
	cmd  *exec.Cmd
}

// Start starts swtpm on state directory dir (empty: a new TPM, with new
// seeds), stopped at the test's end. It skips the test without swtpm,
// unless EIM_REQUIRE_SECUREBOOT is set (as .ci/run sets it, after
// installing it).
func Start(t testing.TB, dir string) *TPM {
	t.Helper()
	if _, err := exec.LookPath("swtpm"); err != nil {
		if os.Getenv("EIM_REQUIRE_SECUREBOOT") != "" {
			t.Fatal("swtpm not installed and EIM_REQUIRE_SECUREBOOT is set")
		}
		t.Skip("swtpm not installed (Debian's swtpm)")
	}
	sock := filepath.Join(dir, "s")
	_ = os.Remove(sock)
	cmd := exec.Command("swtpm", "socket", "--tpm2", "--tpmstate", "dir="+dir,
		"--server", "type=unixio,path="+sock, "--flags", "not-need-init,startup-clear")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &TPM{cmd: cmd}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			s.Conn = c
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("swtpm did not listen on %s in 20 s: %v\n%s", sock, err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling for the socket, with the deadline above
	}
}

// Stop stops swtpm (again: nothing).
func (s *TPM) Stop() {
	if s.Conn != nil {
		s.Conn.Close()
	}
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
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
