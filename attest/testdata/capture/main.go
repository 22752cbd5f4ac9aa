// Command capture is the /init of the initramfs attest's firmware test
// boots: it reads the boot's measurements with the agent's own code
// (agent.ReadMeasuredBoot, as the micro-OS does), prints them on the
// console between markers, base64 of the protobuf message, and powers the
// VM off.
package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sysinit"
)

func main() {
	if err := sysinit.MountKernelFS(); err != nil {
		fmt.Println("capture:", err)
	}
	// The TPM driver may still be probing when init starts.
	for i := 0; i < 50; i++ {
		if _, err := os.Stat("/sys/class/tpm/tpm0"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mb := agent.ReadMeasuredBoot("/")
	b, err := proto.Marshal(mb)
	if err != nil {
		fmt.Println("capture:", err)
	}
	fmt.Println("EIM-MEASURED-BOOT-BEGIN")
	s := base64.StdEncoding.EncodeToString(b)
	for len(s) > 0 {
		n := min(len(s), 76)
		fmt.Println(s[:n])
		s = s[n:]
	}
	fmt.Println("EIM-MEASURED-BOOT-END")
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}
