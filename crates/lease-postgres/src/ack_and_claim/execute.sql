EXECUTE {name}({args})
