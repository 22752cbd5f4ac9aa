package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"syscall"
)

// defaultReplicaID names this process: the machine (a pod's name on
// Kubernetes), the process ID, and a random part, so that a process
// restarted with the same PID in a fresh container is not taken for the
// old one.
func defaultReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "eim"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// lockSQLite takes an exclusive lock on a file beside the SQLite database
// for as long as the process runs: SQLite serves one process (a second
// would split the fleet's liveness and run the run-once loops twice), and
// the operating system drops the lock of a process that dies, so a killed
// server restarts at once.
func lockSQLite(dbPath string) (unlock func() error, err error) {
	path := dbPath + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the database: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, fmt.Errorf("the SQLite database %s is in use by another eim server process: SQLite serves one process; run replicas on PostgreSQL (--database postgres://…)", dbPath)
		}
		return nil, fmt.Errorf("lock the database (%s): %w", path, err)
	}
	return f.Close, nil
}
