package stages

import (
	"fmt"
	"nsca_fast/stages/counters"
	"sync/atomic"
	"time"

	"nsca_fast/conf"
	"nsca_fast/stages/sink"
)

// DropIcingaRejected counts results Icinga 2 refused for good: an unknown
// host or service (404), or values it would not take (400).
const DropIcingaRejected = "icinga2_rejected"

// icingaSink is the Icinga 2 sink with a count of the results it refused,
// so the chain counts them as dropped rather than emitted.
type icingaSink struct {
	*sink.Icinga
	refused atomic.Uint64
}

// Refused is how many results Icinga 2 has refused so far.
func (s *icingaSink) Refused() uint64 { return s.refused.Load() }

func newIcinga(cfg *conf.Config, stats *counters.Stats, log *rateLog) (sink.Sink, error) {
	s := &icingaSink{}
	var err error
	s.Icinga, err = sink.NewIcinga(sink.IcingaConfig{
		URL: cfg.Icinga2URL, User: cfg.Icinga2User, Password: cfg.Icinga2Password,
		CertFile: cfg.Icinga2ClientCert, KeyFile: cfg.Icinga2ClientKey, CAFile: cfg.Icinga2CAFile,
		Insecure: !cfg.Icinga2VerifyTLS, MaxInFlight: cfg.Icinga2MaxInFlight,
		Timeout: time.Duration(cfg.Icinga2Timeout) * time.Second, Retries: cfg.Icinga2Retries,
		Rejected: func(it sink.Item, status int, reason string) {
			s.refused.Add(1)
			stats.DroppedInSink(DropIcingaRejected, 1)
			why := "not sent"
			if status != 0 {
				why = fmt.Sprintf("HTTP %d", status)
			}
			log.Warningf("sink:icinga2", "icinga2 refused the result for host=%q service=%q (%s): %s; not retried",
				it.Result.Host, it.Result.Service, why, reason)
		},
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newGearman(cfg *conf.Config) (sink.Sink, error) {
	gc := sink.GearmanConfig{
		Servers: cfg.GearmanServerList(), Queue: cfg.GearmanQueue, Encrypt: cfg.GearmanEncryption,
		Timeout: time.Duration(cfg.GearmanTimeout) * time.Second,
	}
	if cfg.GearmanEncryption {
		gc.Key = []byte(cfg.GearmanKey)
		if cfg.GearmanKeyFile != "" {
			key, err := sink.ReadGearmanKeyFile(cfg.GearmanKeyFile)
			if err != nil {
				return nil, err
			}
			gc.Key = key
		}
	}
	return sink.NewGearman(gc)
}
