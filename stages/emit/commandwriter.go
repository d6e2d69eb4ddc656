package emit

import (
	"nsca_fast/conf"
	"nsca_fast/stages/emit/sink"
)

// CommandWriter is a front end's own writer of command_file, for the
// commands other than check results it writes once validated; nil
// without command_file. It locks the file around each write, as the emit
// stage's writer and other processes write it too, and follows reopens.
func CommandWriter(cfg *conf.Config, reopens *sink.Reopener) *sink.CommandFile {
	if cfg.CommandFile == "" {
		return nil
	}
	w := sink.NewCommandFile(cfg.CommandFile, cfg.AppendToFile, cfg.AggregateWrites)
	w.Lock = true
	w.Reopens = reopens
	return w
}
