package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WatchSpool plays Nagios' check result reaper for a server that writes
// check result files instead of command file lines (the real NRDP's
// submitcheck: a file in check_results_dir and an empty FILE.ok beside it
// once it is complete): every interval it reads the complete files in
// dir, matches each as the command file line it stands for, and removes
// them. The returned function reads what is left and stops.
func (s *Sink) WatchSpool(dir string, interval time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var scratch []byte
		for {
			select {
			case <-quit:
				s.readSpool(dir, scratch)
				return
			case <-time.After(interval):
				scratch = s.readSpool(dir, scratch)
			}
		}
	}()
	return func() { close(quit); <-done }
}

// readSpool matches and removes the complete check result files in dir.
func (s *Sink) readSpool(dir string, scratch []byte) []byte {
	names, err := os.ReadDir(dir)
	if err != nil {
		s.bad("spool: " + err.Error())
		return scratch
	}
	for _, e := range names {
		ok := e.Name()
		if !strings.HasSuffix(ok, ".ok") {
			continue
		}
		file := filepath.Join(dir, strings.TrimSuffix(ok, ".ok"))
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		now := s.clock()
		s.Lines.Add(1)
		scratch = s.match(spoolLine(b), now, scratch)
		os.Remove(file)
		os.Remove(filepath.Join(dir, ok))
	}
	return scratch
}

// spoolLine turns a check result file into the command file line with the
// same content: "[START] PROCESS_SERVICE_CHECK_RESULT;HOST;SERVICE;CODE;OUTPUT"
// (PROCESS_HOST_CHECK_RESULT without a service). The output's last
// newline, written as the two characters \n, is dropped.
func spoolLine(b []byte) []byte {
	f := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			f[k] = v
		}
	}
	start, _, _ := strings.Cut(f["start_time"], ".")
	line := "[" + start + "] "
	if svc, ok := f["service_description"]; ok {
		line += "PROCESS_SERVICE_CHECK_RESULT;" + f["host_name"] + ";" + svc
	} else {
		line += "PROCESS_HOST_CHECK_RESULT;" + f["host_name"]
	}
	return []byte(line + ";" + f["return_code"] + ";" + strings.TrimSuffix(f["output"], `\n`))
}
