"""The agent network: peers, their health, delegation to them and orchestration across them."""
