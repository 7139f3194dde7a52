package enginesim

// Choice is which engine the simulator models and impersonates: the settings that
// `slogate sim` and `slogate demo` share, in the tags package settings reads.
type Choice struct {
	Profile string `flag:"profile" env:"SLOGATE_SIM_PROFILE" envDefault:"tiny" help:"simulator profile: the engine, model and GPUs it models (slogate sim -h lists them)"`
	Flavor  string `flag:"flavor" env:"SLOGATE_SIM_FLAVOR" envDefault:"vllm" help:"engine the simulator impersonates (metric names and endpoints): vllm or sglang"`
}

// Config returns the simulator configuration of the choice: its profile and flavour.
func (c Choice) Config() (Config, error) {
	p, err := LookupProfile(c.Profile)
	if err != nil {
		return Config{}, err
	}
	return Config{Profile: p, Flavor: Flavor(c.Flavor)}, nil
}
