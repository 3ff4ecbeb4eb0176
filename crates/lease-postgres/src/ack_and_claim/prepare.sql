PREPARE {name}({types}) AS {statement}
