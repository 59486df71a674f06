"""`kcontract drift`: the first torch operator whose output for one request changes with the batch around it.

A request runs alone and inside batches at several slots; every aten operator's output for the request's rows is
recorded (a TorchDispatchMode, module paths from forward hooks), the streams are aligned op by op, and the first op
whose bits differ is reported and, where a family covers it, written out as a contract entry. torch is imported
only here, never by the CLI's help.
"""
