package acpsdk

// MaxLine is the kit's bound on a line of the client's input.
const MaxLine = maxLine
