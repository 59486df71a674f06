"""`kcontract bench`: GPU time of each entry's calls against the read ceiling measured in the same run."""
