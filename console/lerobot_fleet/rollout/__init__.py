"""Model rollouts: the fleet router's controller that moves a service's robots from one model to another in steps."""
