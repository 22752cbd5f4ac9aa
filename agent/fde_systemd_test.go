package agent_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/fde/luks2"
	"github.com/eimhq/eim/fde/systemdtpm2"
	"github.com/eimhq/eim/fde/tpmseal"
	"github.com/eimhq/eim/internal/swtpmtest"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// needSystemdTPM2 skips the test without what systemd needs to unseal
// and enroll with a TPM here: Debian's systemd (systemd-cryptsetup,
// systemd-cryptenroll), cryptsetup-bin, and tpm2-tss (ESAPI, and the swtpm
// TCTI that reaches swtpm) — unless EIM_REQUIRE_SECUREBOOT is set (as
// .ci/run sets it, after installing them).
func needSystemdTPM2(t *testing.T) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"cryptsetup", "systemd-cryptenroll", "swtpm"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat("/usr/lib/systemd/systemd-cryptsetup"); err != nil {
		missing = append(missing, "/usr/lib/systemd/systemd-cryptsetup")
	}
	for _, lib := range []string{"libtss2-esys.so.0", "libtss2-rc.so.0", "libtss2-mu.so.0", "libtss2-tcti-swtpm.so.0"} {
		if m, _ := filepath.Glob("/usr/lib/*/" + lib); len(m) == 0 {
			missing = append(missing, lib)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "missing " + strings.Join(missing, ", ") + " (Debian's systemd, cryptsetup-bin, swtpm, libtss2-esys-3.0.2-0, libtss2-rc0, libtss2-mu0, libtss2-tcti-swtpm0)"
	if os.Getenv("EIM_REQUIRE_SECUREBOOT") != "" {
		t.Fatal(msg + " and EIM_REQUIRE_SECUREBOOT is set")
	}
	t.Skip(msg)
}

// systemdTool runs a systemd command against the swtpm tpm (lent to it:
// swtpm serves one connection at a time), with its debug log.
func systemdTool(t *testing.T, tpm *swtpmtest.TPM, name string, args ...string) (string, error) {
	t.Helper()
	var out []byte
	var err error
	tpm.Lend(t, func() {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=debug")
		out, err = cmd.CombinedOutput()
	})
	return string(out), err
}

// systemdCryptsetup runs systemd-cryptsetup attach on img with the swtpm
// as its TPM (tpm2-device=, the commas of the TCTI escaped in the option
// list), headless, as systemd-cryptsetup@.service runs it at boot, and
// returns its debug log. With no device-mapper here (a container), the
// mapping itself fails: what counts is how far it gets. Its token plugin
// path cannot map either, and systemd-cryptsetup then unseals itself.
func systemdCryptsetup(t *testing.T, tpm *swtpmtest.TPM, img string) (string, error) {
	t.Helper()
	return systemdTool(t, tpm, "/usr/lib/systemd/systemd-cryptsetup", "attach", "eim-root", img, "-",
		"tpm2-device="+strings.ReplaceAll(tpm.TCTI(), ",", `\,`)+",headless=true")
}

func measure(s string) []byte { d := sha256.Sum256([]byte(s)); return d[:] }

// bootedTPM is a swtpm whose PCR 7 holds what firmware measured (a fresh
// swtpm's is zero, which systemd takes for firmware that measures
// nothing).
func bootedTPM(t *testing.T) *swtpmtest.TPM {
	t.Helper()
	tpm := swtpmtest.StartTCTI(t, t.TempDir())
	tpm.Extend(t, 7, measure("SecureBoot=1, PK, KEK, db, dbx"))
	return tpm
}

func newImageFile(t *testing.T, size int64) (string, *os.File) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "root.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return img, f
}

// The root encrypt-root writes is one systemd unlocks from its token alone:
// systemd-cryptsetup attach, as at boot, unseals the key with the TPM
// (systemd 252's primary key, its policy hash) and goes on to activate
// keyslot 0 with it (the mapping then fails here: no device-mapper; that
// systemd's passphrase opens the keyslot is proven the other way round,
// below), and systemd-cryptenroll sees keyslot 0 as its TPM2 enrollment.
// When PCR 7 changes, both systemd and EIM refuse.
func TestEncryptedRootOpensWithSystemd(t *testing.T) {
	needSystemdTPM2(t)
	tpm := bootedTPM(t)
	const size = 32 << 20
	img, f := newImageFile(t, size)
	e := &provisioningv1.EncryptRoot{RecoveryKey: "0123abcd-0123abcd-0123abcd-0123abcd-0123abcd", VolumeUuid: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", Label: "eim-root", Pcrs: []uint32{7}}
	vk, err := agent.FormatRoot(f, size, tpm.Conn, []int{7}, e)
	if err != nil {
		t.Fatal(err)
	}

	out, err := systemdCryptsetup(t, tpm, img)
	if !strings.Contains(out, "Completed TPM2 key unsealing") || !strings.Contains(out, "Activating volume eim-root [keyslot 0] using passphrase") {
		t.Fatalf("systemd-cryptsetup attach: %v, want the key unsealed and keyslot 0 tried:\n%s", err, out)
	}
	out, err = systemdTool(t, tpm, "systemd-cryptenroll", img)
	if err != nil || !regexp.MustCompile(`(?m)^\s*0\s+tpm2\s*$`).MatchString(out) || !regexp.MustCompile(`(?m)^\s*1\s+password\s*$`).MatchString(out) {
		t.Fatalf("systemd-cryptenroll %s: %v, want keyslot 0 tpm2 and 1 password:\n%s", img, err, out)
	}
	// EIM's own unlock (the test OS's init, write-file) reads the same
	// token.
	key, err := agent.UnsealKey(tpm.Conn, f)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := luks2.Unlock(f, key); err != nil || !bytes.Equal(got, vk) {
		t.Fatalf("EIM's unlock: got %v, want the volume key", err)
	}

	tpm.Extend(t, 7, measure("another db"))
	if out, _ := systemdCryptsetup(t, tpm, img); !strings.Contains(out, "Automatically discovered security TPM2 token") || strings.Contains(out, "Completed TPM2 key unsealing") || strings.Contains(out, "[keyslot 0] using passphrase") {
		t.Fatalf("systemd-cryptsetup attach after PCR 7 changed: want the unseal refused:\n%s", out)
	}
	if _, err := agent.UnsealKey(tpm.Conn, f); !errors.Is(err, tpmseal.ErrPolicy) {
		t.Fatalf("EIM's unlock after PCR 7 changed: got %v, want ErrPolicy", err)
	}
}

// A volume systemd-cryptenroll enrolled with the TPM (PCR 7) is one EIM
// unlocks, from systemd's token: the passphrase EIM derives from the
// secret is the one systemd enrolled. When PCR 7 changes, EIM refuses.
func TestSystemdEnrolledVolumeOpensWithEIM(t *testing.T) {
	needSystemdTPM2(t)
	tpm := bootedTPM(t)
	img, f := newImageFile(t, 32<<20)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("an installer's passphrase"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("cryptsetup", "--disable-locks", "--batch-mode", "luksFormat", "--type", "luks2",
		"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", pw, img).CombinedOutput()
	if err != nil {
		t.Fatalf("cryptsetup luksFormat: %v\n%s", err, out)
	}
	out2, err := systemdTool(t, tpm, "systemd-cryptenroll", "--unlock-key-file="+pw, "--tpm2-device="+tpm.TCTI(), "--tpm2-pcrs=7", img)
	if err != nil {
		t.Fatalf("systemd-cryptenroll --tpm2-device: %v\n%s", err, out2)
	}
	h, err := luks2.ReadHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	lt, ok := h.Token(systemdtpm2.TokenType)
	if !ok {
		t.Fatalf("no systemd-tpm2 token after systemd-cryptenroll: %+v\n%s", h.Tokens, out2)
	}
	tok, err := systemdtpm2.Parse(lt)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Keyslot != 1 || tok.Sealed.Bank != "sha256" || tok.Sealed.PrimaryAlg != "ecc" || len(tok.Sealed.PCRs) != 1 || tok.Sealed.PCRs[0] != 7 {
		t.Fatalf("systemd's token: got keyslot %d, %+v; want keyslot 1, PCR 7 of sha256, ecc", tok.Keyslot, tok.Sealed)
	}
	want, err := luks2.Unlock(f, []byte("an installer's passphrase"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := agent.UnsealKey(tpm.Conn, f)
	if err != nil {
		t.Fatalf("EIM's unseal of systemd's token: %v", err)
	}
	if got, err := luks2.Unlock(f, key); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("EIM's unlock of systemd's keyslot: got %v, want the volume key", err)
	}

	tpm.Extend(t, 7, measure("another db"))
	if _, err := agent.UnsealKey(tpm.Conn, f); !errors.Is(err, tpmseal.ErrPolicy) {
		t.Fatalf("EIM's unlock after PCR 7 changed: got %v, want ErrPolicy", err)
	}
}

// A volume installed before EIM sealed as systemd does carries an eim-tpm2
// token with a v1 blob: it still unlocks.
func TestLegacyTokenStillUnlocks(t *testing.T) {
	tpm := swtpmtest.Start(t, t.TempDir())
	_, f := newImageFile(t, 20<<20)
	key := []byte("a key sealed by an older agent, 32")
	blob, err := tpmseal.SealV1(tpm.Conn, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := luks2.Format(f, 20<<20, key, luks2.Options{KDF: luks2.KDF{Type: luks2.KDFPBKDF2, Iterations: 1000}}); err != nil {
		t.Fatal(err)
	}
	if _, err := luks2.AddToken(f, agent.LegacyTPMTokenType, []int{0}, blob); err != nil {
		t.Fatal(err)
	}
	got, err := agent.UnsealKey(tpm.Conn, f)
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("UnsealKey of an eim-tpm2 volume: got %q, %v; want the key", got, err)
	}
	if _, err := luks2.Unlock(f, got); err != nil {
		t.Fatal(err)
	}
	tpm.Extend(t, 7, measure("another db"))
	var pe *tpmseal.PolicyError
	if _, err := agent.UnsealKey(tpm.Conn, f); !errors.As(err, &pe) || len(pe.Changed) != 1 || pe.Changed[0] != 7 {
		t.Fatalf("after PCR 7 changed: got %v, want ErrPolicy naming PCR 7", err)
	}

	// A volume with no TPM token at all says so.
	_, bare := newImageFile(t, 20<<20)
	if _, err := luks2.Format(bare, 20<<20, []byte("k"), luks2.Options{KDF: luks2.KDF{Type: luks2.KDFPBKDF2, Iterations: 1000}}); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.UnsealKey(tpm.Conn, bare); err == nil || !strings.Contains(err.Error(), "neither a systemd-tpm2 nor an eim-tpm2 token") {
		t.Fatalf("a volume without a TPM token: got %v", err)
	}
}
