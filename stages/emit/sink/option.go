package sink

// OptionError is a remote engine's settings that cannot work, naming the
// nsca.cfg option to fix, so that package conf reports it with that
// option's file and line. Conflict says the option is wrong only together
// with others (Reason is then the whole message, in nsca.cfg's terms);
// otherwise its value is bad, for Reason. Kind is the engine's sentinel.
type OptionError struct {
	Option   string
	Conflict bool
	Reason   string
	Kind     error
}

func (e *OptionError) Error() string {
	if e.Reason == "" {
		return e.Kind.Error()
	}
	return e.Kind.Error() + ": " + e.Reason
}

// Unwrap makes the error its Kind for errors.Is.
func (e *OptionError) Unwrap() error { return e.Kind }
